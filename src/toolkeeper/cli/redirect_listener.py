"""The loopback listener ``toolkeeper upstream login`` waits on for the authorization server's
redirect (RFC 8252's loopback redirect): bound before the link is shown, on the redirect URI's
loopback address and port only, answering the redirect URI's path once and nothing else."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import SplitResult, parse_qs, urlsplit

import anyio

__all__ = ["LOOPBACK", "RedirectListener"]

LOOPBACK = ("127.0.0.1", "localhost", "::1")
_DONE = (b"<!doctype html><meta charset=utf-8><title>toolkeeper</title>"
         b"<p>Done: the gateway has its code. You may close this tab.</p>")


class RedirectListener:
    """``with RedirectListener(urlsplit(redirect_uri)) as listener: await listener.wait()``."""

    def __init__(self, target: SplitResult) -> None:
        self.path = target.path or "/"
        self.query: dict[str, str] | None = None
        self.arrived = threading.Event()
        host = "127.0.0.1" if target.hostname == "localhost" else str(target.hostname)
        try:
            self.server = HTTPServer((host, target.port or 80), self._handler())
        except OSError as exc:
            raise RuntimeError(f"cannot listen on {host}:{target.port} for the redirect "
                               f"({exc.strerror}); free that port, or log in with --paste"
                               ) from exc

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                if parts.path != listener.path or listener.arrived.is_set():
                    self.send_error(404)
                    return
                listener.query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Security-Policy", "default-src 'none'")
                self.end_headers()
                self.wfile.write(_DONE)
                listener.arrived.set()

            def log_message(self, *args: Any) -> None:
                return None  # the query holds the code: never logged

        return Handler

    def __enter__(self) -> RedirectListener:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.server.shutdown()
        self.server.server_close()

    async def wait(self) -> dict[str, str]:
        """The redirect's query parameters, once the browser arrives."""
        await anyio.to_thread.run_sync(self.arrived.wait, abandon_on_cancel=True)
        assert self.query is not None
        return self.query
