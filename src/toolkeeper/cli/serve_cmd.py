"""``toolkeeper serve``: the governed MCP server, over Streamable HTTP or stdio."""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer

from ..approval.persisted import PersistedApprovalHandler
from ..approval.pg import is_url
from ..approval.store import PostgresApprovalStore, SqliteApprovalStore
from ..artifacts.store import BlobStore
from ..builtins import SecurityPolicy, default_tools
from ..codemode import ToolChainTool
from ..config import (
    ToolkeeperConfig,
    all_tools_with_runtime,
    chain_policy,
    load_config,
    policy_from,
)
from ..errors import ConfigError, ToolkeeperError
from ..gateway.gateway import MCPGateway, attach_upstreams
from ..gateway.pins import SqlitePins
from ..hooks import HookEvent, HookManager
from ..i18n import localized_tools
from ..invoke.audit import PostgresAuditLog, SqliteAuditLog
from ..invoke.invoker import ToolInvoker
from ..invoke.policy import ChainPolicy
from ..mcp.server import announce_changes, close_sessions, serve_stdio
from ..server.app import LOOPBACK, create_app, page_app
from ..server.auth import WebSessions
from ..server.clients import ANONYMOUS, ClientTokens
from ..server.tokens import check_shared_token, default_client_token, operator_token
from ..skills import load_skills
from ..toolbox.toolbox import Toolbox
from .artifact_store import ArtifactKeeper, artifact_keeper
from .loader import load_offers, load_tools
from .report import fail, out, store_target
from .state import SERVER_FILE, default_state_dir, out_of_reach, secure_state_dir

__all__ = ["serve"]

# One session spans the server's life: its budget and total time must not run out under it.
SERVER_POLICY = ChainPolicy(max_tool_calls=10**9, total_timeout_s=10.0**9)


def serve(
    targets: Annotated[list[str] | None, typer.Argument(
        help="Modules or files of tools to serve ('pkg.mod', 'file.py', 'file.py:obj').")] = None,
    config: Annotated[Path | None, typer.Option(
        "--config", help="toolkeeper.toml: which built-ins exist, autonomy, skills.")] = None,
    stdio: Annotated[bool, typer.Option("--stdio", help="Serve over stdin/stdout.")] = False,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0 takes a free one).")] = 8765,
    state_dir: Annotated[Path | None, typer.Option(
        help="Tokens, approvals and audit (owner-only; never inside a workspace). Default: "
             "$XDG_STATE_HOME/toolkeeper, else ~/.local/state/toolkeeper.")] = None,
    workspace: Annotated[Path | None, typer.Option(
        help="The built-in tools' workspace; wins over the config's [security] workspace. "
             "Default: the config's, else the current directory.")] = None,
    no_builtins: Annotated[bool, typer.Option("--no-builtins",
                                              help="Serve only the TARGET tools.")] = False,
    auth: Annotated[str, typer.Option(
        help="How clients authenticate on /mcp: 'token' (a client token) or 'none' (no "
             "credential, loopback only). Deciding always needs the operator.")] = "token",
    rate_limit: Annotated[float, typer.Option(
        help="Requests per second per client (bursts of twice that); 0 turns the limit "
             "off (a benchmark, or a proxy in front that limits).")] = 50.0,
    public_host: Annotated[list[str] | None, typer.Option(
        help="A host name clients use to reach this server (behind a load balancer); "
             "requests naming another Host are refused. Repeatable.")] = None,
    store: Annotated[str | None, typer.Option(
        help="Where approvals, audit, tokens, page sessions and pins live: a postgresql:// URL "
             "shared by replicas (default: SQLite in --state-dir, or the config's 'store').")
                     ] = None,
    approval_wait: Annotated[float, typer.Option(
        help="Seconds a call that needs approval waits for a decision (toolkeeper approvals "
             "decide) before it answers 'pending'.")] = 30.0,
    approval_ttl: Annotated[float, typer.Option(
        help="Seconds a request stays approvable once asked; then it expires (a "
             "CONTINUE_ON_TIMEOUT one is approved at its hitl_timeout_seconds instead).")
                            ] = 3600.0,
    keep_sessions: Annotated[bool, typer.Option(
        "--sessions", help="Keep an MCP session per HTTP client connection, so a tool can ask "
                           "its client (sampling, elicitation) on the 2025-11-25 wire and a "
                           "broken stream resumes; one process only (replicas cannot share "
                           "sessions).")] = False,
    artifacts: Annotated[str | None, typer.Option(
        help="Where results above max_inline_result_bytes are offloaded (a directory), or "
             "'off' to send them inline. Default: the config's [server] artifact_dir, else "
             "artifacts/ in --state-dir.")] = None,
) -> None:
    """Serve tools to MCP clients, every call through the invoker (budget, validation,
    approval, timeouts, audit). Calls that need approval are stored and answered 'pending'."""
    if importlib.util.find_spec("mcp") is None or importlib.util.find_spec("uvicorn") is None:
        raise fail("toolkeeper serve needs the mcp extra: pip install 'toolkeeper[mcp]'")
    if not 0 <= approval_wait < SERVER_POLICY.approval_timeout_s:
        raise fail(f"--approval-wait must be between 0 and "
                   f"{SERVER_POLICY.approval_timeout_s:g} s (below the call's time limit)")
    if approval_ttl <= 0:
        raise fail("--approval-ttl must be a positive number of seconds")
    if rate_limit < 0:
        raise fail("--rate-limit must be a number of requests per second, or 0 for no limit")
    if auth not in ("token", "none"):
        raise fail("--auth must be 'token' or 'none'")
    if auth == "none" and host not in LOOPBACK:
        raise fail(f"--auth none is refused on {host}: without a token, listen on 127.0.0.1 only")
    try:
        settings = load_config(config) if config is not None else None
        settings, ws, ws_from = _workspace(settings, workspace)
        state = state_dir if state_dir is not None else default_state_dir()
        served = not no_builtins or bool(settings and settings.codemode.enabled
                                         and settings.codemode.workspace != "none")
        _out_of_reach(state, settings, ws, served=served)
        secure_state_dir(state, traversable=served and _inside(ws, state))
        db = store_target(store or (settings.store if settings else None), state)
        keeper = artifact_keeper(settings, state, given=artifacts,
                                 workspace=ws if served else None)
        invoker = _invoker(targets or [], db, ws, settings, builtins=not no_builtins,
                           approval_wait=approval_wait, approval_ttl=approval_ttl,
                           artifacts=keeper.store if keeper else None)
        skills = load_skills(settings.skills.dir) if settings and settings.skills.dir else []
        offers = [offer for target in targets or [] for offer in load_offers(target)]
    except ToolkeeperError as exc:
        raise fail(exc) from exc
    gateway = _gateway(settings, db, invoker)
    token, source = operator_token(state)
    if stdio:
        _serve_stdio(invoker, skills, gateway, state, db, token, offers, keeper)
        return
    try:
        check_shared_token(db, token)
        clients = ClientTokens(db)
        sessions = WebSessions(db)
        client_token = default_client_token(state, clients) if auth == "token" else None
    except ToolkeeperError as exc:
        raise fail(exc) from exc
    stopping = threading.Event()
    app = create_app(invoker, token=token, host=host, clients=clients, skills=skills,
                     rate_limit=rate_limit, gateway=gateway, sessions=sessions,
                     stopping=stopping, public_hosts=public_host or (),
                     anonymous=ANONYMOUS if auth == "none" else None,
                     ask_client=bool(settings and "client" in settings.approval.channels),
                     offers=offers, keep_sessions=keep_sessions)
    start = Start(host=host, state_dir=state, workspace=(ws, ws_from) if served else None,
                  auth=auth, client_token=client_token, login=sessions.login_code(),
                  token_source=source)
    _listen(app, port, start, gateway, invoker, stopping, keeper)


def _serve_stdio(invoker: ToolInvoker, skills: list[Any], gateway: MCPGateway | None,
                 state: Path, db: str | Path, token: str, offers: list[Any],
                 keeper: ArtifactKeeper | None = None) -> None:
    """MCP on stdin/stdout (what a desktop client launches), and the approval page on a free
    loopback port: its login link, and a line for each call that waits, go to stderr (the
    client's server log)."""
    import uvicorn

    try:
        check_shared_token(db, token)
        sessions = WebSessions(db)
    except ToolkeeperError as exc:
        raise fail(exc) from exc
    stopping = threading.Event()
    sock = _bind("127.0.0.1", 0)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    invoker.approvals.page_url = url
    page = uvicorn.Server(uvicorn.Config(page_app(invoker, token=token, sessions=sessions,
                                                  stopping=stopping),
                                         log_level="warning", lifespan="off"))

    async def run_page() -> None:
        try:
            async with anyio.create_task_group() as group:
                if keeper is not None:
                    group.start_soon(keeper.run)
                await page.serve(sockets=[sock])
                group.cancel_scope.cancel()
        finally:
            stopping.set()

    _record_server(state, url)
    _report([f"approval page: {url}/login?code={sessions.login_code()} (this link logs a "
             "browser in once)", f"state: {state}"])
    hooks = invoker.approvals.hooks
    if hooks is not None:
        hooks.register(HookEvent.APPROVAL_REQUESTED, _tell_operator(invoker))
    try:
        serve_stdio(invoker, skills=skills, gateway=gateway, on_report=_report,
                    alongside=run_page, offers=offers)
    finally:
        _flush(invoker)
        _forget_server(state)


def _tell_operator(invoker: ToolInvoker) -> Any:
    async def tell(_event: HookEvent, payload: dict[str, Any]) -> None:
        request = payload.get("request", {})
        _report([f"'{request.get('tool')}' waits for a person's approval (request "
                 f"{request.get('id')}): {invoker.approvals.where(str(request.get('id')))}"])
    return tell


def _gateway(settings: ToolkeeperConfig | None, db: str | Path, invoker: ToolInvoker
             ) -> MCPGateway | None:
    """The upstream MCP servers of ``[mcp]`` when it is enabled (pins in the state dir; what
    it relays of sampling and elicitation goes in the invoker's audit log)."""
    if settings is None or not settings.mcp.servers:
        return None
    if not settings.mcp.enabled:
        _report([f"{len(settings.mcp.servers)} MCP server(s) configured but not served: set "
                 "enabled = true under [mcp]"])
        return None
    return MCPGateway(settings.mcp.servers, pins=SqlitePins(db),
                      refresh_s=settings.mcp.refresh_s, audit=invoker.audit)


def _report(lines: list[str]) -> None:
    """Gateway events for the operator, one line each, on stderr (stdout may be the MCP
    stream)."""
    for line in lines:
        print(f"toolkeeper: {line}", file=sys.stderr, flush=True)


def _invoker(targets: list[str], db: str | Path, workspace: Path,
             settings: ToolkeeperConfig | None, *, builtins: bool, approval_wait: float,
             approval_ttl: float, artifacts: BlobStore | None = None) -> ToolInvoker:
    """The served tools and the door: with a config, its built-ins (gated, explained) and its
    autonomy; without one, the minimal built-ins over ``workspace``, supervised."""
    tools: list[Any] = [t for target in targets for t in load_tools(target)]
    policy = SERVER_POLICY
    if builtins and settings is not None:
        tools += localized_tools(all_tools_with_runtime(settings), settings.locale,
                                 workspace=workspace)  # seed 004's locale and search order
        policy = chain_policy(settings, SERVER_POLICY)
    elif builtins:
        tools += localized_tools(default_tools(SecurityPolicy(workspace=workspace)),
                                 workspace=workspace)
    policy = policy.model_copy(update={"approval_ttl_s": approval_ttl})
    if settings is not None:  # a client's session and a code-mode run alike
        policy = policy.model_copy(update={"max_audit_rows": settings.security.max_audit_rows})
    shared = is_url(db)
    store = PostgresApprovalStore(str(db)) if shared else SqliteApprovalStore(db)
    audit = PostgresAuditLog(str(db)) if shared else SqliteAuditLog(db)
    handler = PersistedApprovalHandler(store, wait_s=approval_wait, poll_s=0.05)
    box = Toolbox(tools)
    invoker = ToolInvoker(box, handler, policy=policy, audit=audit, hooks=HookManager(),
                          artifact_store=artifacts)
    if settings is not None and settings.codemode.enabled:
        box.add(_code_mode(invoker, settings))
    return invoker


def _code_mode(invoker: ToolInvoker, settings: ToolkeeperConfig) -> ToolChainTool:
    """``tool_chain`` as ``[codemode]`` says: its own budget and total time; every call of a
    script passes this invoker (approval, audit) like a direct one."""
    section = settings.codemode
    policy = invoker.policy.model_copy(update={"max_tool_calls": section.max_tool_calls,
                                               "total_timeout_s": section.total_timeout_s})
    workspace = settings.security.workspace if section.workspace != "none" else None
    return ToolChainTool(invoker, tools=section.tools, policy=policy, workspace=workspace,
                         writable=section.workspace == "write", warm=section.warm,
                         security=policy_from(settings))  # the file tools' protected paths


def _workspace(settings: ToolkeeperConfig | None, given: Path | None
               ) -> tuple[ToolkeeperConfig | None, Path, str]:
    """(the config with the workspace in force, the workspace, where it came from):
    ``--workspace``, else the config's ``[security] workspace`` (relative to the config's
    directory), else the current directory."""
    if given is not None:
        ws = given.expanduser().resolve()
        if settings is not None:
            settings = settings.model_copy(update={"security": settings.security.model_copy(
                update={"workspace": ws})})
        return settings, ws, "--workspace"
    if settings is not None:
        return settings, settings.security.workspace.resolve(), "the config's [security]"
    return None, Path.cwd().resolve(), "the current directory"


def _out_of_reach(state: Path, settings: ToolkeeperConfig | None, ws: Path, *,
                  served: bool) -> None:
    """Nothing a tool reaches may hold a credential: not the workspace (the file tools, shell,
    git, search and the code-mode mount all work in it), not the commands' environment."""
    if served:
        out_of_reach(state, [("workspace", ws)])
    passed = settings.security.shell_env_passthrough if settings is not None else []
    leaked = [name for name in passed if name.upper().startswith("TOOLKEEPER_")]
    if leaked:
        raise ConfigError(f"[security] shell_env_passthrough names {', '.join(leaked)}: "
                          "toolkeeper's own credentials never reach a command; remove them")


def _inside(path: Path, folder: Path) -> bool:
    return folder.expanduser().resolve() in path.parents


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


def _bind(host: str, port: int) -> socket.socket:
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


def _listen(app: Any, port: int, start: Start, gateway: MCPGateway | None,
            invoker: ToolInvoker, stopping: threading.Event,
            keeper: ArtifactKeeper | None = None) -> None:
    import uvicorn  # the HTTP server: only when serving over HTTP
    from uvicorn.server import HANDLED_SIGNALS

    sock = _bind(start.host, port)

    caught: list[int] = []

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            stopping.set()  # the page's event streams end, so requests in flight can finish
            caught.append(sig)
            super().handle_exit(sig, frame)

        @contextmanager
        def capture_signals(self) -> Iterator[None]:
            """uvicorn's, without raising the signal again as ``serve`` returns (SIGTERM's
            default action then ended the process before the audit flush and the cleanup
            below); it is raised again once those are done."""
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            original = {sig: signal.signal(sig, self.handle_exit) for sig in HANDLED_SIGNALS}
            try:
                yield
            finally:
                for sig, handler in original.items():
                    signal.signal(sig, handler)

    server = Server(uvicorn.Config(app, log_level="warning", lifespan="on",
                                   timeout_graceful_shutdown=10))

    async def run() -> None:
        async with AsyncExitStack() as stack:
            if gateway is not None:
                await stack.enter_async_context(gateway)
            url = _announce(sock, start)
            invoker.approvals.page_url = url  # a waiting call's messages name its card
            stack.callback(_forget_server, start.state_dir)
            stack.callback(_flush, invoker)  # last: after every request in flight has ended
            _record_server(start.state_dir, url)
            async with anyio.create_task_group() as group:
                group.start_soon(announce_changes, app.mcp_server, invoker.registry)
                if keeper is not None:
                    group.start_soon(keeper.run, app.mcp_server)
                if gateway is not None:  # local tools are served meanwhile
                    group.start_soon(attach_upstreams, gateway, invoker.registry, _report)
                await server.serve(sockets=[sock])
                group.cancel_scope.cancel()
            await close_sessions(app.mcp_server)  # their audit summaries, before the flush

    anyio.run(run)
    for sig in reversed(caught):  # the usual end of a process stopped by a signal
        signal.raise_signal(sig)


def _flush(invoker: ToolInvoker) -> None:
    """Write every audit row still queued (Ctrl-C, SIGTERM) and stop the writer thread."""
    close = getattr(invoker.audit, "close", None)
    if close is not None:
        close()


def _record_server(state_dir: Path, url: str) -> None:
    """``server.json`` in the state dir: which server runs on it (for ``approvals
    login-url``); owner-only, replaced atomically."""
    path = state_dir / SERVER_FILE
    temp = path.with_name(f".{SERVER_FILE}.{os.getpid()}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    with os.fdopen(fd, "w") as file:
        json.dump({"url": url, "pid": os.getpid(), "started_at": time.time()}, file)
    os.replace(temp, path)


def _forget_server(state_dir: Path) -> None:
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
    if start.auth == "none":
        lines.append("auth none: any local process may call tools on /mcp as client "
                     f"'{ANONYMOUS}'; deciding still needs the operator")
    for line in lines:
        out.print(line, markup=False, highlight=False, soft_wrap=True)
    sys.stdout.flush()
    return url
