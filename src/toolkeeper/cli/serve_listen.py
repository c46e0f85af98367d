"""What ``toolkeeper serve`` says and leaves where it serves: its sockets, the start lines it
prints, the server file in the state dir, the waits it releases and the audit it flushes as it
stops (``serve_run`` calls them in order)."""

from __future__ import annotations

import errno
import json
import os
import socket
import sys
import time
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..approval.handlers import Releases
from ..invoke.invoker import ToolInvoker
from ..server.clients import ANONYMOUS
from ..server.gate import ASGIApp, Receive, Scope, Send
from ..server.oauth import OAuthResource
from .report import fail, out
from .state import SERVER_FILE

__all__ = ["WORKER_HEADER", "Start", "WorkerHeader", "bind_socket", "bound_socket", "flush_audit",
           "forget_server", "print_lines", "record_server", "release_waits", "report_lines", "server_url"]

WORKER_HEADER = b"toolkeeper-worker"
"""The response header naming the worker of ``--workers`` that answered (1 to N)."""


class WorkerHeader:
    """Every answer of worker ``index`` says so (``toolkeeper-worker: 2``): an operator sees
    how the kernel spreads connections, a test which worker took a request."""

    def __init__(self, app: ASGIApp, index: int) -> None:
        self.app, self.value = app, str(index).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def told(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), (WORKER_HEADER, self.value)]
            await send(message)

        await self.app(scope, receive, told)


def report_lines(lines: list[str]) -> None:
    """Gateway events for the operator, one line each, on stderr (stdout may be the MCP
    stream)."""
    for line in lines:
        print(f"toolkeeper: {line}", file=sys.stderr, flush=True)


@dataclass(frozen=True, kw_only=True)
class Start:
    """What the start lines tell the operator."""

    host: str
    state_dir: Path
    workspace: tuple[Path, str] | None
    auth: str
    client_token: str | None
    login: str
    token_source: str
    oauth: OAuthResource | None = None
    metrics: bool = False
    metrics_port: int | None = None
    client_approves: bool = False
    """``[approval] channels`` has ``client``: the agent's client may approve its own calls."""

    def lines(self, url: str) -> list[str]:
        """The start lines of a server at ``url``: where it serves, the page's login link, the
        client config (with a client token, never the operator's), the workspace and state
        dir in use."""
        lines = [f"toolkeeper serving on {url} (MCP at /mcp)",
                 f"approval page: {url}/login?code={self.login} (this link logs a browser in "
                 "once)"]
        entry: dict[str, object] = {"type": "http", "url": f"{url}/mcp"}
        if self.auth == "token":
            token = self.client_token or "<a client token: toolkeeper tokens add NAME>"
            entry["headers"] = {"Authorization": f"Bearer {token}"}
        lines.append("client config: " + json.dumps({"mcpServers": {"toolkeeper": entry}}))
        if self.workspace is not None:
            lines.append(f"workspace: {self.workspace[0]} (from {self.workspace[1]})")
        operator = {"env": "from TOOLKEEPER_TOKEN", "new": "new", "stored": "stored"}[
            self.token_source]
        lines.append(f"state: {self.state_dir} (operator token {operator}: for the page, the "
                     "API and the CLI only, never for a client)")
        return lines + self._more_lines(url)

    def _more_lines(self, url: str) -> list[str]:
        lines = []
        if self.oauth is not None:
            lines.append(f"oauth: access tokens from {self.oauth.issuer} for "
                         f"{self.oauth.resource} (metadata: {self.oauth.metadata_url})")
        if self.metrics:
            lines.append(f"metrics: {url}/metrics (operator token)" + (
                f" and http://127.0.0.1:{self.metrics_port}/metrics (loopback, no credential)"
                if self.metrics_port is not None else ""))
        if self.auth == "none":
            lines.append("auth none: any local process may call tools on /mcp as client "
                         f"'{ANONYMOUS}'; deciding still needs the operator")
        if self.client_approves:
            lines.append("approval channels page and client: an MCP client is asked to approve "
                         "its own calls too, and whoever answers its form decides (the agent, "
                         "if it answers it); keep 'client' only where the person at the client "
                         "is the approver ([approval] channels in the config)")
        return lines


def server_url(sock: socket.socket, host: str) -> str:
    """The URL of the server listening on ``sock``, by the host it was asked to listen on."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{sock.getsockname()[1]}"


def print_lines(lines: list[str]) -> None:
    """The start lines of a server over HTTP, on stdout, in one write: a stop that comes as
    soon as the first line is read never cuts the rest."""
    out.print("\n".join(lines), markup=False, highlight=False, soft_wrap=True)
    sys.stdout.flush()


def bind_socket(host: str, port: int, *, reuse_port: bool = False,
                option: str = "--port") -> socket.socket:
    """A listening TCP socket whose connections send small writes at once (``TCP_NODELAY``).
    An answer goes out in pieces (the status line and headers, then the body, then the end of
    a chunked body): with Nagle's algorithm on, the last piece waited for the client's delayed
    ACK, 40 ms on every request after the first on a kept-alive connection. asyncio turns
    Nagle off only on sockets made with ``IPPROTO_TCP`` (a plain ``socket()`` has protocol 0),
    and Linux copies the option from the listening socket to each accepted one: both are set.

    With ``reuse_port`` (a worker of ``--workers``) the socket joins the others on the port
    (``SO_REUSEPORT``: the kernel spreads new connections over them)."""
    sock = bound_socket(host, port, reuse_port=reuse_port, option=option)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.listen(128)  # connections queue from here on, before the server loop starts
    return sock


def bound_socket(host: str, port: int, *, reuse_port: bool = False,
                 option: str = "--port") -> socket.socket:
    """A TCP socket bound to ``host:port``, not listening yet; a port in use, or one that
    cannot be had, is refused in one line naming ``option``, the flag that chose the port.
    ``reuse_port``: it joins the others on the port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise fail(f"port {port} ({option}) is in use; pass {option} N, or {option} 0 for a "
                       "free one") from exc
        raise fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    return sock


def release_waits(invoker: ToolInvoker) -> None:
    """Every call waiting for a person's decision answers ``pending`` now, as when its wait
    ends (the request stays stored: the call made again takes its decision)."""
    handler: object = invoker.approvals.handler
    if isinstance(handler, Releases):
        handler.release()


def flush_audit(invoker: ToolInvoker) -> None:
    """Write every audit row still queued (Ctrl-C, SIGTERM) and stop the writer thread."""
    close = getattr(invoker.audit, "close", None)
    if close is not None:
        close()


def record_server(state_dir: Path, url: str) -> None:
    """``server.json`` in the state dir: which server runs on it (for ``approvals
    login-url``); owner-only, replaced atomically."""
    path = state_dir / SERVER_FILE
    temp = path.with_name(f".{SERVER_FILE}.{os.getpid()}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    with os.fdopen(fd, "w") as file:
        json.dump({"url": url, "pid": os.getpid(), "started_at": time.time()}, file)
    os.replace(temp, path)


def forget_server(state_dir: Path) -> None:
    path = state_dir / SERVER_FILE
    try:
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError):
        pass
