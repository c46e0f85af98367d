"""The HTTP face: the MCP endpoint at ``/mcp`` (the SDK's Streamable HTTP in stateless mode, so
any replica can answer any request), the approval page at ``/`` and its JSON API under
``/api/``, ``/healthz`` — behind ``TokenGate`` (tokens, rate limit, Host/Origin checks).

``http_app`` makes it from its parts — an ``MCPFace`` built by whoever assembles the server,
who may reach it (``Access``), the routes beside ``/mcp`` — and ``create_app`` builds those
parts from an invoker, for embedding the endpoint in an app of your own."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from ..approval.store import SqliteApprovalStore
from ..extras import require
from ..gateway.gateway import MCPGateway
from ..invoke.invoker import ToolInvoker
from ..mcp.sealed_sessions import SealedSessions
from ..mcp.server import MCPFace
from ..mcp.session_store import SessionStore
from ..mcp.task_wire import store_of
from ..notify.links import DecisionLinks
from ..skills.skill import Skill
from .auth import WebSessions
from .clients import ClientTokens
from .exchange import SingleExchange
from .gate import LOOPBACK, TokenGate
from .gate_layers import Shared
from .metrics import ServerMetrics
from .notify_links import DecisionLinkPage
from .oauth import OAuthResource
from .tokens import shared_state_key
from .tracecontext import ContinuedTrace, traced_only
from .web import web_routes

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from ..mcp.server import FaceServer
    from .gate import ASGIApp, Receive, Scope, Send

__all__ = ["LOOPBACK", "Access", "HttpApp", "TokenGate", "create_app", "http_app", "metrics_app",
           "page_app", "page_routes"]


@dataclass(frozen=True, kw_only=True)
class Access:
    """Who may reach the HTTP face, by which names, and how often.

    ``token`` is the operator's (the page's API and the CLI; refused on ``/mcp``); clients use
    their own tokens from ``clients`` — or, with ``anonymous`` (loopback only), none: every
    request to ``/mcp`` without a credential is that client's. ``sessions``: the page's login
    sessions. ``oauth``: accept OAuth access tokens too. ``rate_limit``: requests per second
    per client (0: no limit). ``public_hosts``: names clients reach it by besides ``host``."""

    token: str | None
    host: str = "127.0.0.1"
    public_hosts: tuple[str, ...] = ()
    clients: ClientTokens | None = None
    sessions: WebSessions | None = None
    anonymous: str | None = None
    oauth: OAuthResource | None = None
    rate_limit: float = 50.0
    shared_rate: Shared | None = None
    """Where the rate limit's buckets are counted when several processes serve (the store);
    ``None``: in this process."""

    @property
    def burst(self) -> int:
        """The requests a client may send at once: twice its rate per second."""
        return max(1, int(self.rate_limit * 2))

    @property
    def hosts(self) -> frozenset[str]:
        """The host names a request may name: ``host`` (on loopback, every loopback name),
        ``public_hosts`` and the OAuth resource's host."""
        own = {self.host, *LOOPBACK} if self.host in LOOPBACK else {self.host}
        oauth = {self.oauth.host} if self.oauth is not None else set()
        return frozenset(own | set(self.public_hosts) | oauth)


class HttpApp:
    """The ASGI app of ``toolkeeper serve``: ``TokenGate`` in front of the trace context, the
    lean ``tools/call``/``tools/list`` path and the SDK's Streamable HTTP app with the page,
    the API, ``/healthz`` and ``/metrics`` beside ``/mcp``. ``face`` is the MCP face it
    serves."""

    def __init__(self, face: MCPFace, gate: TokenGate) -> None:
        self.face = face
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope["headers"] = _trimmed(scope["headers"])
        await self.gate(scope, receive, send)

    @property
    def mcp_server(self) -> FaceServer:
        """The MCP ``Server`` behind it. Goes away in 0.3.0: use ``app.face.server``."""
        return self.face.server


def _trimmed(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """Header values without the whitespace around them, which is no part of a value (RFC 9110
    5.5): h11 strips it, httptools keeps it, and a kept space made ``Mcp-Name: " add "`` name
    another tool than ``add``."""
    if all(value[:1] not in _OWS and value[-1:] not in _OWS for _, value in headers):
        return headers
    return [(name, value.strip(b" \t")) for name, value in headers]


_OWS = (b" ", b"\t")


def http_app(face: MCPFace, access: Access, *, routes: Sequence[BaseRoute] = (),
             max_body_bytes: int = 8 << 20, keep_sessions: bool = False,
             stopping: threading.Event | None = None) -> HttpApp:
    """The HTTP face of ``face``: ``/mcp`` (stateless unless ``keep_sessions``: an MCP session
    per client, which every process sharing ``face``'s state key and store carries on) with
    ``routes`` beside it, behind the gate ``access`` describes. Calls cancelled once
    ``stopping`` is set are answered, not dropped. A request carrying a W3C ``traceparent``
    makes its calls' spans part of that trace."""
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    catalog = face.catalog

    async def healthz(_request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "tools": len(catalog.names())})

    bare = [f"[{h}]" if ":" in h else h for h in access.hosts]
    hosts = bare + [f"{h}:*" for h in bare]  # with and without a port (a proxy may drop it)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts,
        allowed_origins=[f"http://{h}" for h in hosts] + [f"https://{h}" for h in hosts])
    server = face.server
    traced_only(server.middleware)  # no span work per request while nothing traces
    beside = cast("list[Route]", [Route("/healthz", healthz), *routes])
    if keep_sessions:  # sessions any worker or replica on the store carries on
        app: Any = _session_app(face, security, beside, max_body_bytes)
    else:
        app = server.streamable_http_app(
            streamable_http_path="/mcp", stateless_http=True, host=access.host,
            transport_security=security, max_request_body_size=max_body_bytes,
            custom_starlette_routes=beside)
    # tools/call and tools/list on the 2025 wire: one request through the SDK's own kernel,
    # answered with one JSON body (an event stream only when the call sends notifications).
    lean = SingleExchange(app, server, security=security, max_body_bytes=max_body_bytes,
                          stopping=stopping, state=face.state)

    gate = TokenGate(ContinuedTrace(lean), access.token, clients=access.clients,
                     rate=access.rate_limit, burst=access.burst, shared=access.shared_rate,
                     sessions=access.sessions, hosts=tuple(access.hosts),
                     anonymous=access.anonymous, oauth=access.oauth, tool_name=face.exported.tool_name,
                     max_body_bytes=max_body_bytes)
    return HttpApp(face, gate)


def _session_app(face: MCPFace, security: Any, routes: list[Any], max_body_bytes: int) -> Any:
    """``/mcp`` keeping MCP sessions whose ids any process on the store opens (see
    ``mcp/sealed_sessions.py``), with ``routes`` beside it."""
    from starlette.applications import Starlette
    from starlette.routing import Route

    sessions = SealedSessions(face.server, secret=face.state_secret or secrets.token_hex(32),
                              store=SessionStore(store_of(face.invoker)),
                              security=security,
                              retry_interval=100, max_body_bytes=max_body_bytes)
    return Starlette(routes=[Route("/mcp", endpoint=sessions), *routes],
                     lifespan=lambda _app: sessions.run())


def page_routes(invoker: ToolInvoker, sessions: WebSessions | None, *,
                metrics: ServerMetrics | None = None,
                stopping: threading.Event | None = None,
                links: DecisionLinks | None = None) -> list[BaseRoute]:
    """What ``/mcp`` has beside it: ``/metrics`` (the operator's), with ``sessions`` and a
    SQLite approval store the approval page and its API (the invoker's policies deciding who
    may decide what), and with ``links`` the notifications' decision links."""
    from starlette.routing import Route

    routes: list[BaseRoute] = []
    if metrics is not None:
        routes.append(Route("/metrics", metrics.endpoint))
    store = invoker.approvals.store
    if sessions is not None and isinstance(store, SqliteApprovalStore):
        routes += web_routes(store, invoker.audit, sessions, stopping=stopping,
                             catalog=invoker.registry, policies=invoker.policies)
    if links is not None and isinstance(store, SqliteApprovalStore):
        routes += DecisionLinkPage(store, invoker.audit, links, catalog=invoker.registry).routes()
    return routes


def create_app(invoker: ToolInvoker, *, token: str | None, host: str = "127.0.0.1",
               clients: ClientTokens | None = None, skills: Sequence[Skill] = (),
               rate_limit: float = 50.0, max_body_bytes: int = 8 << 20,
               gateway: MCPGateway | None = None, sessions: WebSessions | None = None,
               stopping: threading.Event | None = None,
               public_hosts: Sequence[str] = (), anonymous: str | None = None,
               ask_client: bool = False, offers: Sequence[Any] = (),
               keep_sessions: bool = False, oauth: OAuthResource | None = None,
               metrics: ServerMetrics | None = None,
               links: DecisionLinks | None = None, state_key: str | None = None) -> HttpApp:
    """The ASGI app of ``toolkeeper serve``, for embedding in an app of your own: an
    ``MCPFace`` over ``invoker`` and ``http_app`` around it (``Access`` says what ``token``,
    ``clients``, ``sessions``, ``anonymous``, ``oauth``, ``rate_limit``, ``host`` and
    ``public_hosts`` mean). With ``sessions`` and a SQLite approval store, the approval page
    and API are served too. ``ask_client``: a call that needs approval also asks the person at
    the client (``[approval] channels``). With a ``gateway`` (entered and attached by the
    caller), a tools/list refreshes its upstream servers when their listing is older than its
    ``refresh_s``. ``offers``: the resources and prompts declared with ``@resource`` and
    ``@prompt``. ``metrics``: serve them at ``/metrics``, to the operator only. ``links``: the
    single-use decision links of notifications (``/notify/{token}``). ``state_key``: the key
    ``requestState`` is sealed under, the same for every replica — by default the one kept in
    the store of ``sessions`` (made by the first app on it), else one made for this process;
    never derived from ``token``, since clients hold every sealed state."""
    require("server", "the toolkeeper serve app")
    if ask_client and token is None:
        raise ValueError("asking the client needs the operator token (pass token=...)")
    if state_key is None:
        state_key = shared_state_key(sessions.db) if sessions is not None \
            else secrets.token_hex(32)
    face = MCPFace(invoker, skills=skills, gateway=gateway, announces=keep_sessions,
                   ask_client=token if ask_client else None, offers=offers,
                   state_secret=state_key)
    access = Access(token=token, host=host, public_hosts=tuple(public_hosts), clients=clients,
                    sessions=sessions, anonymous=anonymous, oauth=oauth, rate_limit=rate_limit)
    routes = page_routes(invoker, sessions, metrics=metrics, stopping=stopping, links=links)
    return http_app(face, access, routes=routes, max_body_bytes=max_body_bytes,
                    keep_sessions=keep_sessions, stopping=stopping)


def page_app(invoker: ToolInvoker, *, token: str, sessions: WebSessions,
             stopping: threading.Event | None = None,
             links: DecisionLinks | None = None) -> TokenGate:
    """The approval page and its API alone, for loopback (``toolkeeper serve --stdio``: the
    client speaks MCP over stdio, a person decides in a browser), with the notifications'
    decision links (``links``)."""
    require("server", "the approval page")
    from starlette.applications import Starlette

    store = invoker.approvals.store
    if not isinstance(store, SqliteApprovalStore):
        raise TypeError("the approval page needs the invoker's approval store")
    routes = web_routes(store, invoker.audit, sessions, stopping=stopping,
                        catalog=invoker.registry, policies=invoker.policies)
    if links is not None:
        routes += DecisionLinkPage(store, invoker.audit, links, catalog=invoker.registry).routes()
    inner = Starlette(routes=routes)
    return TokenGate(inner, token, sessions=sessions, hosts=LOOPBACK, protected=("/api",))


def metrics_app(metrics: ServerMetrics) -> ASGIApp:
    """``/metrics`` alone, without a credential, for a port of its own on loopback
    (``toolkeeper serve --metrics-port``): a request naming another Host is refused."""
    from starlette.applications import Starlette
    from starlette.routing import Route

    inner = Starlette(routes=[Route("/metrics", metrics.open_endpoint)])
    return TokenGate(inner, None, hosts=LOOPBACK, protected=(), rate=0)
