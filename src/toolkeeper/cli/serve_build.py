"""``toolkeeper serve``'s assembly: every part of the server, built once from the settings, each
handed what it needs in its constructor.

The order is what the parts need of each other. The listening socket is bound first (its port
is in the page's URL, which the door's approval service names in a waiting call's messages);
then the artifact store, the door (``serve_door``), the credentials, the gateway, the MCP face
(the gateway's hub and the operator secret in hand) and what faces the network: over HTTP the
app on the socket and ``/metrics`` on a port of its own; over stdio the client's pipe, and the
approval page on the socket. The notifications of ``[approval.notify]`` are built beside the
door (their decision links are routes of the page). What runs beside the calls — change
announcements, the upstreams' listings, the artifact sweep, the notifier — is listed as tasks.
``serve_run`` starts, drains and stops it all the same way for both.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from functools import partial

from ..approval.pg import is_url
from ..artifacts.store import SharedBlobStore
from ..builtins.preflight import host_warnings
from ..errors import ToolkeeperError
from ..extras import MissingExtraError, require
from ..gateway.credentials import UpstreamCredentials
from ..gateway.gateway import MCPGateway, attach_upstreams
from ..gateway.pins import SqlitePins
from ..hooks import HookEvent
from ..invoke.invoker import ToolInvoker
from ..mcp.server import MCPFace
from ..notify.links import DecisionLinks
from ..server.app import Access, http_app, metrics_app, page_app, page_routes
from ..server.auth import WebSessions
from ..server.clients import ANONYMOUS, ClientTokens
from ..server.gate import ASGIApp
from ..server.metrics import ServerMetrics
from ..server.oauth import OAuthResource
from ..server.rate_buckets import Leases, shared_rate
from ..server.tokens import (
    check_shared_token,
    default_client_token,
    operator_token,
    shared_state_key,
    upstream_key,
)
from ..skills import load_skills
from .artifact_store import ArtifactKeeper, artifact_store
from .lifecycle import DRAIN_S, Lifecycle
from .loader import load_offers
from .report import fail
from .serve_door import build_door, govern
from .serve_listen import Start, WorkerHeader, bind_socket, report_lines, server_url
from .serve_notify import Notifying, notifying
from .serve_settings import ServeSettings
from .state import no_state_in, out_of_reach, secure_state_dir

__all__ = ["Listener", "Served", "assemble"]

Task = Callable[[], Coroutine[object, object, None]]


@dataclass(frozen=True)
class Listener:
    """An ASGI app served on a socket bound at the start. ``lifespan``: it runs its own
    startup and shutdown (the SDK's session manager); ``grace_s``: how long uvicorn lets its
    requests finish once it stops (a backstop: the drain answers them first)."""

    app: ASGIApp
    sock: socket.socket
    lifespan: bool = False
    grace_s: int | None = None


@dataclass(frozen=True, kw_only=True)
class Served:
    """Everything one serve process runs: what ``assemble`` built, for ``serve_run``."""

    settings: ServeSettings
    invoker: ToolInvoker
    face: MCPFace
    gateway: MCPGateway | None
    url: str
    """Where a person decides: the server's address, or (stdio) its page's."""
    listeners: tuple[Listener, ...]
    """The HTTP app (or, over stdio, the approval page) first, then ``/metrics``'s port."""
    tasks: tuple[Task, ...]
    """What runs beside the calls until the server stops."""
    lines: Callable[[], list[str]]
    """The start lines (called once the server is up)."""
    stopping: threading.Event = field(default_factory=threading.Event)
    """Set when the stop begins: the page's event streams end, a call cancelled is answered."""


def assemble(settings: ServeSettings, life: Lifecycle) -> Served:
    """Build ``toolkeeper serve`` from ``settings``, checking for a stop signal between steps.

    Raises:
        typer.Exit: a part cannot be built (one line saying why and what to do).
        Stopped: a stop signal came while it was built.
    """
    _require(settings)
    try:
        _state_out_of_reach(settings)
        life.check()
        main = bind_socket(settings.flags.host if not settings.flags.stdio else "127.0.0.1",
                           0 if settings.flags.stdio else settings.flags.port,
                           reuse_port=settings.flags.workers > 1)
        url = server_url(main, settings.flags.host if not settings.flags.stdio else "127.0.0.1")
        store = artifact_store(settings.artifact_dir, ttl_s=settings.artifact_ttl_s,
                               workspace=settings.workspace if settings.served else None,
                               url=settings.artifact_url)
        invoker = build_door(settings, page_url=url, artifacts=store)
        life.check()
        config = settings.config  # policies on upstream tools wait for their listing
        govern(invoker, [s.name for s in config.mcp.servers]
               if config is not None and config.mcp.enabled else [])
        notify = notifying(settings.config, invoker)
        token, source = operator_token(settings.state_dir)
        check_shared_token(settings.db, token)
        sessions = WebSessions(settings.db)
        face, gateway = _face(settings, invoker, token)
        oauth = OAuthResource(settings.oauth) if settings.oauth is not None else None
        served = _fronted(settings, face, gateway, main, url, sessions=sessions, token=token,
                          source=source, oauth=oauth, store=store, notify=notify)
    except (ToolkeeperError, MissingExtraError) as exc:
        raise fail(exc) from exc
    if settings.worker <= 1:  # one line per tool that cannot run (worker 1 says it for all)
        report_lines(host_warnings(invoker.registry.all()))
    life.check()
    return served


def _require(settings: ServeSettings) -> None:
    """The extras the settings need, named in one line when one is missing."""
    try:
        require("server", "toolkeeper serve")
        if not settings.flags.no_builtins:
            require("builtins", "toolkeeper serve's built-in tools (--no-builtins serves "
                                "without)")
        if settings.oauth is not None:
            require("oauth", "OAuth access tokens")
    except MissingExtraError as exc:
        raise fail(exc) from None


def _state_out_of_reach(settings: ServeSettings) -> None:
    """Nothing a tool reaches may hold a credential: not the workspace (the file tools, shell,
    git, search and the code-mode mount all work in it) — neither this server's state dir nor
    any other state folder. Then the state dir is made, owner-only."""
    if settings.served:
        out_of_reach(settings.state_dir, [("workspace", settings.workspace)])
        no_state_in(settings.workspace)
    secure_state_dir(settings.state_dir)


def _face(settings: ServeSettings, invoker: ToolInvoker, token: str
          ) -> tuple[MCPFace, MCPGateway | None]:
    """The MCP face over the door, with the gateway of ``[mcp]`` when it is enabled (pins in
    the store; what it relays of sampling and elicitation in the door's audit log)."""
    config = settings.config
    gateway = None
    if config is not None and config.mcp.servers and not config.mcp.enabled:
        if settings.worker <= 1:  # worker 1 says it for all
            report_lines([f"{len(config.mcp.servers)} MCP server(s) configured but not "
                          "served: set enabled = true under [mcp]"])
    elif config is not None and config.mcp.servers:
        credentials = UpstreamCredentials(settings.db, upstream_key(settings.state_dir)) \
            if any(s.oauth is not None for s in config.mcp.servers) else None
        policies = invoker.policies
        gateway = MCPGateway(config.mcp.servers, pins=SqlitePins(settings.db),
                             refresh_s=config.mcp.refresh_s, audit=invoker.audit,
                             credentials=credentials,
                             on_listed=policies.listed if policies is not None else None)
    skills = load_skills(config.skills.dir) if config is not None and config.skills.dir else []
    offers = [offer for target in settings.flags.targets for offer in load_offers(target)]
    flags = settings.flags  # connections that stay open are told of list changes
    face = MCPFace(invoker, skills=skills, gateway=gateway, offers=offers,
                   state_secret=shared_state_key(settings.db),
                   announces=flags.stdio or flags.keep_sessions,
                   tool_search=settings.tool_search,
                   ask_client=token if settings.ask_client and not settings.flags.stdio
                   else None)
    return face, gateway


def _tasks(face: MCPFace, gateway: MCPGateway | None, keeper: ArtifactKeeper | None,
           notify: Notifying | None) -> tuple[Task, ...]:
    """Beside the calls: change announcements, the upstreams' listings, the sweep, the
    approval notifications."""
    catalog = face.catalog
    tasks: list[Task] = [partial(face.changes.follow, catalog)]
    if gateway is not None:  # local tools are served meanwhile
        tasks.append(partial(attach_upstreams, gateway, catalog, report_lines))
    if keeper is not None:
        tasks.append(keeper.run)
    if notify is not None:  # beside the calls, never in their way
        tasks.append(notify.notifier.run)
    return tuple(tasks)


def _fronted(settings: ServeSettings, face: MCPFace, gateway: MCPGateway | None,
             main: socket.socket, url: str, *, sessions: WebSessions, token: str, source: str,
             oauth: OAuthResource | None, store: SharedBlobStore | None,
             notify: Notifying | None) -> Served:
    """What faces the clients and the operator, with the tasks beside the calls."""
    stopping = threading.Event()
    keeper = ArtifactKeeper(store=store, ttl_s=settings.artifact_ttl_s,
                            release=face.release_artifacts) if store is not None else None
    tasks = _tasks(face, gateway, keeper, notify)
    links = notify.links if notify is not None else None
    invoker = face.invoker
    if settings.flags.stdio:
        invoker.approvals.hooks.register(HookEvent.APPROVAL_REQUESTED, _tell_operator(invoker))
        page = Listener(page_app(invoker, token=token, sessions=sessions, stopping=stopping,
                                 links=links), main)
        login = sessions.login_code()
        return Served(settings=settings, invoker=invoker, face=face, gateway=gateway, url=url,
                      listeners=(page,), tasks=tasks, stopping=stopping, lines=lambda: [
                          f"approval page: {url}/login?code={login} (this link logs a browser "
                          "in once)", f"state: {settings.state_dir}"])
    return _over_http(settings, face, gateway, main, url, sessions=sessions, token=token,
                      source=source, oauth=oauth, stopping=stopping, tasks=tasks, links=links)


def _over_http(settings: ServeSettings, face: MCPFace, gateway: MCPGateway | None,
               main: socket.socket, url: str, *, sessions: WebSessions, token: str,
               source: str, oauth: OAuthResource | None, stopping: threading.Event,
               tasks: tuple[Task, ...], links: DecisionLinks | None) -> Served:
    flags, invoker = settings.flags, face.invoker
    clients = ClientTokens(settings.db)
    client_token = default_client_token(settings.state_dir, clients) \
        if flags.auth == "token" else None
    metrics = ServerMetrics(invoker, gateway=gateway)
    access = Access(token=token, host=flags.host, public_hosts=flags.public_host,
                    clients=clients, sessions=sessions, oauth=oauth, rate_limit=flags.rate_limit,
                    anonymous=ANONYMOUS if flags.auth == "none" else None,
                    shared_rate=_shared_rate(settings))
    app: ASGIApp = http_app(face, access, keep_sessions=flags.keep_sessions, stopping=stopping,
                            routes=page_routes(invoker, sessions, metrics=metrics,
                                               stopping=stopping, links=links))
    if settings.worker:  # one of --workers: its answers name it
        app = WorkerHeader(app, settings.worker)
    listeners = [Listener(app, main, lifespan=True, grace_s=DRAIN_S + 1)]
    if flags.metrics_port is not None:
        listeners.append(Listener(metrics_app(metrics),
                                  bind_socket("127.0.0.1", flags.metrics_port,
                                              option="--metrics-port")))
    start = Start(host=flags.host, state_dir=settings.state_dir,
                  workspace=(settings.workspace, settings.workspace_from)
                  if settings.served else None, auth=flags.auth, client_token=client_token,
                  login=sessions.login_code(), token_source=source, oauth=oauth, metrics=True,
                  metrics_port=listeners[1].sock.getsockname()[1] if len(listeners) > 1
                  else None, client_approves=settings.ask_client)
    return Served(settings=settings, invoker=invoker, face=face, gateway=gateway, url=url,
                  listeners=tuple(listeners), tasks=tasks, stopping=stopping,
                  lines=partial(start.lines, url))


def _shared_rate(settings: ServeSettings) -> Leases | None:
    """With several workers, or replicas on one PostgreSQL store, a client's connections land
    on any of them: its rate limit is counted in the store they share."""
    rate = settings.flags.rate_limit
    if rate <= 0 or (settings.flags.workers == 1 and not is_url(settings.db)):
        return None
    return shared_rate(settings.db, rate=rate, burst=max(1, int(rate * 2)),
                       workers=settings.flags.workers)


def _tell_operator(invoker: ToolInvoker) -> Callable[[HookEvent, dict[str, object]],
                                                     Awaitable[None]]:
    """Over stdio, a line on stderr (the client's server log) for each call that waits."""
    async def tell(_event: HookEvent, payload: dict[str, object]) -> None:
        request = payload.get("request")
        found = request if isinstance(request, dict) else {}
        report_lines([f"'{found.get('tool')}' waits for a person's approval (request "
                      f"{found.get('id')}): {invoker.approvals.where(str(found.get('id')))}"])
    return tell
