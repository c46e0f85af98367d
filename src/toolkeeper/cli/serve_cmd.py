"""``toolkeeper serve``: the governed MCP server, over Streamable HTTP or stdio."""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer

from ..approval.persisted import PersistedApprovalHandler
from ..approval.pg import is_url
from ..approval.store import PostgresApprovalStore, SqliteApprovalStore
from ..artifacts.store import BlobStore
from ..builtins import SecurityPolicy, default_tools
from ..builtins.preflight import host_warnings
from ..codemode import ToolChainTool
from ..config import (
    ToolkeeperConfig,
    all_tools_with_runtime,
    chain_policy,
    load_config,
    policy_from,
)
from ..errors import ConfigError, ToolkeeperError
from ..extras import MissingExtraError, require
from ..gateway.gateway import MCPGateway
from ..gateway.pins import SqlitePins
from ..hooks import HookEvent, HookManager
from ..i18n import localized_tools
from ..invoke.audit import PostgresAuditLog, SqliteAuditLog
from ..invoke.invoker import ToolInvoker
from ..invoke.policy import ChainPolicy
from ..mcp.server import serve_stdio
from ..policy import Policies, PolicyStore
from ..server.app import LOOPBACK, create_app, metrics_app, page_app
from ..server.auth import WebSessions
from ..server.clients import ANONYMOUS, ClientTokens
from ..server.metrics import ServerMetrics
from ..server.oauth import OAuthResource, oauth_settings
from ..server.tokens import check_shared_token, default_client_token, operator_token
from ..skills import load_skills
from ..toolbox.toolbox import Toolbox
from .artifact_store import ArtifactKeeper, artifact_keeper
from .lifecycle import DRAIN_S, Lifecycle, Stopped
from .loader import load_offers, load_tools
from .report import fail, store_target
from .serve_extras import ServeAsks, missing_extras
from .serve_listen import (
    Start,
    bind_socket,
    flush_audit,
    forget_server,
    listen,
    record_server,
    release_waits,
    report_lines,
)
from .serve_notify import Notifying, notifying
from .state import default_state_dir, no_state_in, out_of_reach, secure_state_dir

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
    oauth_issuer: Annotated[str | None, typer.Option(
        help="Accept OAuth access tokens (JWTs) from this authorization server too (its "
             "'iss'); needs --oauth-resource. Wins over [server.oauth] issuer.")] = None,
    oauth_resource: Annotated[str | None, typer.Option(
        help="This server's MCP endpoint as clients reach it (https://tools.example.com/mcp): "
             "the audience every access token must name.")] = None,
    oauth_audience: Annotated[list[str] | None, typer.Option(
        help="Another audience to accept besides --oauth-resource (an API identifier). "
             "Repeatable.")] = None,
    oauth_jwks_url: Annotated[str | None, typer.Option(
        help="The issuer's key set (default: found through the issuer's metadata).")] = None,
    metrics_port: Annotated[int | None, typer.Option(
        help="Also serve /metrics without a credential on 127.0.0.1 at this port (0 takes a "
             "free one), for a Prometheus on this machine; on the main port /metrics needs "
             "the operator token.")] = None,
    artifacts: Annotated[str | None, typer.Option(
        help="Where results above max_inline_result_bytes are offloaded (a directory), or "
             "'off' to send them inline. Default: the config's [server] artifact_dir, else "
             "artifacts/ in --state-dir.")] = None,
) -> None:
    """Serve tools to MCP clients, every call through the invoker (budget, validation,
    approval, timeouts, audit). Calls that need approval are stored and answered 'pending'."""
    options = dict(locals())  # the command's options, as given
    life = Lifecycle()
    life.install()  # SIGTERM and SIGINT are serve's from here on, whatever it is doing
    try:
        try:
            _serve(life, **options)
        except* Stopped:  # a signal while starting: nothing serves yet, nothing to answer
            pass
    except (typer.Exit, typer.Abort):
        raise
    except Exception as exc:  # a fault of ours or of a library: one line, not 100
        unexpected = RuntimeError("toolkeeper serve stopped on an unexpected error: "
                                  + _one_line(exc))
        unexpected.__cause__ = exc  # --debug shows its traceback
        raise fail(unexpected) from exc
    if life.stopping():
        life.end()  # the process ends here, as the signal asks


def _one_line(exc: BaseException) -> str:
    """An exception as one line: its type and message (the first of a group's)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:600]


def _serve(life: Lifecycle, *, targets: list[str] | None, config: Path | None, stdio: bool,
           host: str, port: int, state_dir: Path | None, workspace: Path | None,
           no_builtins: bool, auth: str, rate_limit: float, public_host: list[str] | None,
           store: str | None, approval_wait: float, approval_ttl: float, keep_sessions: bool,
           oauth_issuer: str | None, oauth_resource: str | None,
           oauth_audience: list[str] | None, oauth_jwks_url: str | None,
           metrics_port: int | None, artifacts: str | None) -> None:
    absent = missing_extras(ServeAsks(config=config, builtins=not no_builtins, store=store,
                                      oauth=bool(oauth_issuer or oauth_resource)))
    if absent is not None:  # every extra missing, in one install line, before anything starts
        raise fail(absent)
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
    if metrics_port is not None and (stdio or not 0 <= metrics_port <= 65535):
        raise fail("--metrics-port must be a port from 0 to 65535, and serving over HTTP "
                   "(not with --stdio)")
    try:
        settings = load_config(config) if config is not None else None
        settings, ws, ws_from = _workspace(settings, workspace)
        life.check()
        state = state_dir if state_dir is not None else default_state_dir()
        served = not no_builtins or bool(settings and settings.codemode.enabled
                                         and settings.codemode.workspace != "none")
        _out_of_reach(state, settings, ws, served=served)
        secure_state_dir(state)
        db = store_target(store or (settings.store if settings else None), state)
        keeper = artifact_keeper(settings, state, given=artifacts,
                                 workspace=ws if served else None)
        invoker = _invoker(targets or [], db, ws, settings, builtins=not no_builtins,
                           approval_wait=approval_wait, approval_ttl=approval_ttl,
                           artifacts=keeper.store if keeper else None)
        life.check()
        _govern(invoker)
        skills = load_skills(settings.skills.dir) if settings and settings.skills.dir else []
        offers = [offer for target in targets or [] for offer in load_offers(target)]
        section = oauth_settings(settings.server.oauth if settings else None,
                                 issuer=oauth_issuer, resource=oauth_resource,
                                 jwks_url=oauth_jwks_url, audience=oauth_audience or [])
        notify = notifying(settings, invoker)
    except (ToolkeeperError, MissingExtraError) as exc:
        raise fail(exc) from exc
    report_lines(host_warnings(invoker.registry.all()))  # one line per tool that cannot run
    if section is not None and (stdio or auth == "none"):
        raise fail("OAuth access tokens are for HTTP clients that authenticate: drop --stdio "
                   "and --auth none, or the OAuth settings")
    if section is not None:
        try:
            require("oauth", "OAuth access tokens")
        except MissingExtraError as exc:
            raise fail(exc) from None
    oauth = OAuthResource(section) if section is not None else None
    gateway = _gateway(settings, db, invoker)
    token, source = operator_token(state)
    life.check()
    if stdio:
        _serve_stdio(invoker, skills, gateway, state, db, token, offers, life, keeper, notify)
        return
    try:
        check_shared_token(db, token)
        clients = ClientTokens(db)
        sessions = WebSessions(db)
        client_token = default_client_token(state, clients) if auth == "token" else None
    except ToolkeeperError as exc:
        raise fail(exc) from exc
    stopping = threading.Event()
    metrics = ServerMetrics(invoker, gateway=gateway)  # the server extra brings its package
    ask_client = bool(settings and "client" in settings.approval.channels)
    app = create_app(invoker, token=token, host=host, clients=clients, skills=skills,
                     rate_limit=rate_limit, gateway=gateway, sessions=sessions,
                     stopping=stopping, public_hosts=[*(public_host or ()),
                                                      *([oauth.host] if oauth else [])],
                     anonymous=ANONYMOUS if auth == "none" else None,
                     ask_client=ask_client,
                     offers=offers, keep_sessions=keep_sessions, oauth=oauth,
                     metrics=metrics, links=notify.links if notify else None)
    life.check()
    side = None
    if metrics_port is not None:
        side = (metrics_app(metrics), bind_socket("127.0.0.1", metrics_port))
    start = Start(host=host, state_dir=state, workspace=(ws, ws_from) if served else None,
                  auth=auth, client_token=client_token, login=sessions.login_code(),
                  token_source=source, oauth=oauth, metrics=True,
                  metrics_port=side[1].getsockname()[1] if side else None,
                  client_approves=ask_client)
    listen(app, port, start, gateway, invoker, life, stopping, side, keeper,
           notify.notifier if notify else None)


def _serve_stdio(invoker: ToolInvoker, skills: list[Any], gateway: MCPGateway | None,
                 state: Path, db: str | Path, token: str, offers: list[Any], life: Lifecycle,
                 keeper: ArtifactKeeper | None = None, notify: Notifying | None = None) -> None:
    """MCP on stdin/stdout (what a desktop client launches), and the approval page on a free
    loopback port: its login link, and a line for each call that waits, go to stderr (the
    client's server log). It serves until the client closes stdin or a stop signal."""
    import uvicorn

    try:
        check_shared_token(db, token)
        sessions = WebSessions(db)
    except ToolkeeperError as exc:
        raise fail(exc) from exc
    stopping = threading.Event()
    sock = bind_socket("127.0.0.1", 0)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    invoker.approvals.page_url = url

    class Page(uvicorn.Server):
        @contextmanager
        def capture_signals(self) -> Iterator[None]:  # the lifecycle holds the signals
            yield

    page = Page(uvicorn.Config(page_app(invoker, token=token, sessions=sessions,
                                        stopping=stopping,
                                        links=notify.links if notify else None),
                               log_level="warning", lifespan="off"))

    async def run_page() -> None:
        try:
            async with anyio.create_task_group() as group:
                if keeper is not None:
                    group.start_soon(keeper.run)
                if notify is not None:  # beside the calls, never in their way
                    group.start_soon(notify.notifier.run)
                await page.serve(sockets=[sock])
                group.cancel_scope.cancel()
        finally:
            stopping.set()

    async def until() -> None:  # a stop signal
        signalled = anyio.Event()

        def begin() -> None:
            stopping.set()
            release_waits(invoker)  # a call waiting for a person answers 'pending'
            page.should_exit = True
            signalled.set()
        life.serving(asyncio.get_running_loop(), begin)
        await signalled.wait()

    def ready() -> None:  # the MCP server is built: say where a person decides
        life.check()
        record_server(state, url)
        report_lines([f"approval page: {url}/login?code={sessions.login_code()} (this link "
                      "logs a browser in once)", f"state: {state}"])

    hooks = invoker.approvals.hooks
    if hooks is not None:
        hooks.register(HookEvent.APPROVAL_REQUESTED, _tell_operator(invoker))
    try:
        serve_stdio(invoker, skills=skills, gateway=gateway, on_report=report_lines,
                    alongside=run_page, until=until, drain_s=DRAIN_S, offers=offers,
                    on_ready=ready)
    finally:
        life.at("writing the audit log")
        flush_audit(invoker)
        forget_server(state)


def _tell_operator(invoker: ToolInvoker) -> Any:
    async def tell(_event: HookEvent, payload: dict[str, Any]) -> None:
        request = payload.get("request", {})
        report_lines([f"'{request.get('tool')}' waits for a person's approval (request "
                 f"{request.get('id')}): {invoker.approvals.where(str(request.get('id')))}"])
    return tell


def _gateway(settings: ToolkeeperConfig | None, db: str | Path, invoker: ToolInvoker
             ) -> MCPGateway | None:
    """The upstream MCP servers of ``[mcp]`` when it is enabled (pins in the state dir; what
    it relays of sampling and elicitation goes in the invoker's audit log)."""
    if settings is None or not settings.mcp.servers:
        return None
    if not settings.mcp.enabled:
        report_lines([f"{len(settings.mcp.servers)} MCP server(s) configured but not served: set "
                 "enabled = true under [mcp]"])
        return None
    return MCPGateway(settings.mcp.servers, pins=SqlitePins(db),
                      refresh_s=settings.mcp.refresh_s, audit=invoker.audit)




def _invoker(targets: list[str], db: str | Path, workspace: Path,
             settings: ToolkeeperConfig | None, *, builtins: bool, approval_wait: float,
             approval_ttl: float, artifacts: BlobStore | None = None) -> ToolInvoker:
    """The served tools and the door: with a config, its built-ins (gated, explained) and its
    autonomy; without one, the minimal built-ins over ``workspace``, supervised."""
    tools: list[Any] = [t for target in targets for t in load_tools(target)]
    policy = SERVER_POLICY
    if builtins and settings is not None:
        tools += localized_tools(all_tools_with_runtime(settings), settings.locale,
                                 workspace=workspace)  # the config's locale, then the environment's
        policy = chain_policy(settings, SERVER_POLICY)
    elif builtins:
        tools += localized_tools(default_tools(SecurityPolicy(workspace=workspace)),
                                 workspace=workspace)
    # --approval-wait is the policy's wait (a session's and a code-mode run's too); the
    # handler keeps no wait of its own
    policy = policy.model_copy(update={"approval_ttl_s": approval_ttl,
                                       "approval_timeout_s": approval_wait})
    if settings is not None:  # a client's session and a code-mode run alike
        policy = policy.model_copy(update={"max_audit_rows": settings.security.max_audit_rows,
                                           "approval_ttl_tools": settings.approval.ttl})
    shared = is_url(db)
    store = PostgresApprovalStore(str(db)) if shared else SqliteApprovalStore(db)
    audit = PostgresAuditLog(str(db)) if shared else SqliteAuditLog(db)
    handler = PersistedApprovalHandler(store, wait_s=math.inf, poll_s=0.05)
    box = Toolbox(tools)
    policies = Policies(box, directory=settings.policy_dir() if settings else None,
                        store=PolicyStore(db), defaults=settings.policy.defaults if settings
                        else True, workspace=workspace,
                        report=lambda line: report_lines([line]))
    invoker = ToolInvoker(box, handler, policy=policy, audit=audit, hooks=HookManager(),
                          artifact_store=artifacts, policies=policies)
    if settings is not None and settings.codemode.enabled:
        box.add(_code_mode(invoker, settings))
    return invoker


def _govern(invoker: ToolInvoker) -> None:
    """Read and check the policies against the whole catalog (code mode's tool included),
    then keep watching the files and the stored rules."""
    if invoker.policies is not None:
        invoker.policies.load()
        invoker.policies.watch()


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
    git, search and the code-mode mount all work in it) — neither this server's state dir nor
    any other state folder — not the commands' environment."""
    if served:
        out_of_reach(state, [("workspace", ws)])
        no_state_in(ws)
    passed = settings.security.shell_env_passthrough if settings is not None else []
    leaked = [name for name in passed if name.upper().startswith("TOOLKEEPER_")]
    if leaked:
        raise ConfigError(f"[security] shell_env_passthrough names {', '.join(leaked)}: "
                          "toolkeeper's own credentials never reach a command; remove them")
