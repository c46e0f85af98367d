"""How ``toolkeeper serve`` listens: its socket, the start lines it prints, the server file,
the audit flush at the end, and ``/metrics`` on a port of its own."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from ..approval.handlers import Releases
from ..gateway.gateway import MCPGateway, attach_upstreams
from ..invoke.invoker import ToolInvoker
from ..mcp.server import announce_changes, close_sessions, stop_calls
from ..notify.notifier import Notifier
from ..server.clients import ANONYMOUS
from ..server.oauth import OAuthResource
from .artifact_store import ArtifactKeeper
from .lifecycle import DRAIN_S, Lifecycle
from .report import fail, out
from .state import SERVER_FILE

__all__ = ["Start", "bind_socket", "flush_audit", "forget_server", "listen", "record_server",
           "release_waits", "report_lines"]

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


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket whose connections send small writes at once (``TCP_NODELAY``).
    An answer goes out in pieces (the status line and headers, then the body, then the end of
    a chunked body): with Nagle's algorithm on, the last piece waited for the client's delayed
    ACK, 40 ms on every request after the first on a kept-alive connection. asyncio turns
    Nagle off only on sockets made with ``IPPROTO_TCP`` (a plain ``socket()`` has protocol 0),
    and Linux copies the option from the listening socket to each accepted one: both are set."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise fail(f"port {port} is in use; pass --port N or --port 0") from exc
        raise fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    sock.listen(128)  # connections queue from here on, before the server loop starts
    return sock


def listen(app: Any, port: int, start: Start, gateway: MCPGateway | None,
           invoker: ToolInvoker, life: Lifecycle, stopping: threading.Event,
           side: tuple[Any, socket.socket] | None = None,
           keeper: ArtifactKeeper | None = None, notifier: Notifier | None = None) -> None:
    """Serve ``app`` until a stop signal, then stop as ``lifecycle.py`` says: calls waiting for
    a person answered ``pending``, calls in flight given ``DRAIN_S`` and then cancelled (each
    answered), the sessions closed, the server file removed, the audit flushed."""
    import uvicorn  # the HTTP server: only when serving over HTTP

    sock = bind_socket(start.host, port)

    class Server(uvicorn.Server):
        @contextmanager
        def capture_signals(self) -> Iterator[None]:
            """None: the lifecycle holds the process's signals from its first line on."""
            yield

    quiet = Server(uvicorn.Config(side[0], log_level="warning", lifespan="off")) if side else None
    # uvicorn's limit is a backstop: the calls still running at DRAIN_S are cancelled, and
    # answered, before it
    server = Server(uvicorn.Config(app, log_level="warning", lifespan="on",
                                   timeout_graceful_shutdown=DRAIN_S + 1))

    def begin() -> None:  # in the event loop, at the first signal
        stopping.set()  # the page's event streams end
        release_waits(invoker)
        server.should_exit = True
        if quiet is not None:
            quiet.should_exit = True
        asyncio.get_running_loop().call_later(DRAIN_S, stop_calls, app.mcp_server)

    async def run() -> None:
        life.serving(asyncio.get_running_loop(), begin)
        async with AsyncExitStack() as stack:
            if gateway is not None:
                await stack.enter_async_context(gateway)
                stack.callback(life.at, "closing the upstream MCP servers")
            url = _announce(sock, start)
            invoker.approvals.page_url = url  # a waiting call's messages name its card
            stack.callback(forget_server, start.state_dir)
            stack.callback(flush_audit, invoker)  # last: after every request in flight has ended
            stack.callback(life.at, "writing the audit log")
            record_server(start.state_dir, url)
            async with anyio.create_task_group() as group:
                group.start_soon(announce_changes, app.mcp_server, invoker.registry)
                if keeper is not None:  # the artifact store's sweep
                    group.start_soon(keeper.run, app.mcp_server)
                if notifier is not None:  # approval notifications, beside the calls
                    group.start_soon(notifier.run)
                ended = anyio.Event()
                if quiet is not None and side is not None:  # /metrics on its own port
                    group.start_soon(_serve_then_set, quiet, side[1], ended)
                else:
                    ended.set()
                if gateway is not None:  # local tools are served meanwhile
                    group.start_soon(attach_upstreams, gateway, invoker.registry, report_lines)
                await server.serve(sockets=[sock])  # until the stop has answered every call
                life.at("stopping the metrics port")
                if quiet is not None:
                    quiet.should_exit = True  # stopped with the main server, not cut off
                with anyio.move_on_after(DRAIN_S):
                    await ended.wait()
                group.cancel_scope.cancel()
            life.at("closing the client sessions")
            await close_sessions(app.mcp_server)  # their audit summaries, before the flush

    anyio.run(run)


def release_waits(invoker: ToolInvoker) -> None:
    """Every call waiting for a person's decision answers ``pending`` now, as when its wait
    ends (the request stays stored: the call made again takes its decision)."""
    handler: object = invoker.approvals.handler
    if isinstance(handler, Releases):
        handler.release()


async def _serve_then_set(server: Any, sock: socket.socket, ended: anyio.Event) -> None:
    try:
        await server.serve(sockets=[sock])
    finally:
        ended.set()


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


def _announce(sock: socket.socket, start: Start) -> str:
    """The start lines: where it serves, the page's login link, the client config (with a
    client token, never the operator's), the workspace and state dir in use. Returns the URL."""
    host = start.host
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{sock.getsockname()[1]}"
    lines = [f"toolkeeper serving on {url} (MCP at /mcp)",
             f"approval page: {url}/login?code={start.login} (this link logs a browser in once)"]
    entry: dict[str, Any] = {"type": "http", "url": f"{url}/mcp"}
    if start.auth == "token":
        token = start.client_token or "<a client token: toolkeeper tokens add NAME>"
        entry["headers"] = {"Authorization": f"Bearer {token}"}
    lines.append("client config: " + json.dumps({"mcpServers": {"toolkeeper": entry}}))
    if start.workspace is not None:
        lines.append(f"workspace: {start.workspace[0]} (from {start.workspace[1]})")
    operator = {"env": "from TOOLKEEPER_TOKEN", "new": "new", "stored": "stored"}[
        start.token_source]
    lines.append(f"state: {start.state_dir} (operator token {operator}: for the page, the API "
                 "and the CLI only, never for a client)")
    if start.oauth is not None:
        lines.append(f"oauth: access tokens from {start.oauth.issuer} for "
                     f"{start.oauth.resource} (metadata: {start.oauth.metadata_url})")
    if start.metrics:
        lines.append(f"metrics: {url}/metrics (operator token)" + (
            f" and http://127.0.0.1:{start.metrics_port}/metrics (loopback, no credential)"
            if start.metrics_port is not None else ""))
    if start.auth == "none":
        lines.append("auth none: any local process may call tools on /mcp as client "
                     f"'{ANONYMOUS}'; deciding still needs the operator")
    if start.client_approves:
        lines.append("approval channels page and client: an MCP client is asked to approve "
                     "its own calls too, and whoever answers its form decides (the agent, if it "
                     "answers it); keep 'client' only where the person at the client is the "
                     "approver ([approval] channels in the config)")
    # One write: a stop that comes as soon as the first line is read never cuts the rest.
    out.print("\n".join(lines), markup=False, highlight=False, soft_wrap=True)
    sys.stdout.flush()
    return url
