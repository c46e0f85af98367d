"""Real receivers on loopback for the notification tests: an HTTP server that records every
POST (ntfy, webhooks, Slack- and Teams-shaped JSON), one that accepts a connection and never
answers, a port nothing listens on, and an SMTP server (aiosmtpd) that keeps every mail."""

from __future__ import annotations

import email
import email.policy
import http.server
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Any


@dataclass(frozen=True)
class Post:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class _Seen:
    """What a receiver got, with a bounded wait for more."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.changed = threading.Condition()

    def add(self, item: Any) -> None:
        with self.changed:
            self.items.append(item)
            self.changed.notify_all()

    def wait(self, what: str, test: Callable[[list[Any]], bool] = bool,
             timeout: float = 60.0) -> list[Any]:
        """The items once ``test`` holds of them; fails naming what was seen instead."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while not test(self.items):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {what} within {timeout:g} s; got {self.items!r}")
                self.changed.wait(left)
            return list(self.items)


class HttpReceiver(_Seen):
    """POSTs to ``url``, answered 200 (or ``status``)."""

    def __init__(self, status: int = 200) -> None:
        super().__init__()
        seen = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                seen.add(Post(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"id": "received"}')

            def log_message(self, *_args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.hostport = self.url.removeprefix("http://")
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def posts(self, path: str, count: int = 1, timeout: float = 60.0) -> list[Post]:
        got = self.wait(f"{count} POST(s) to {path}",
                        lambda items: sum(p.path == path for p in items) >= count, timeout)
        return [p for p in got if p.path == path]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Hanging(_Seen):
    """Accepts connections and never answers (a receiver that hangs)."""

    def __init__(self) -> None:
        super().__init__()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)
            self.add(conn.getpeername())

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def refused_port() -> int:
    """A loopback port nothing listens on (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class MailReceiver(_Seen):
    """An SMTP server (aiosmtpd) keeping every mail it is given."""

    def __init__(self) -> None:
        super().__init__()
        from aiosmtpd.controller import Controller

        seen = self

        class Handler:
            async def handle_DATA(self, _server: object, _session: object,
                                  envelope: Any) -> str:
                seen.add(email.message_from_bytes(envelope.content, policy=email.policy.default))
                return "250 OK"

        self.port = refused_port()
        self.controller = Controller(Handler(), hostname="127.0.0.1", port=self.port)
        self.controller.start()

    def mails(self, count: int = 1, timeout: float = 60.0) -> list[EmailMessage]:
        return self.wait(f"{count} mail(s)", lambda items: len(items) >= count, timeout)

    def close(self) -> None:
        self.controller.stop()


@contextmanager
def receiving() -> Iterator[HttpReceiver]:
    receiver = HttpReceiver()
    try:
        yield receiver
    finally:
        receiver.close()
