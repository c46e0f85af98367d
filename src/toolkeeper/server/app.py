"""The HTTP face: the MCP endpoint at ``/mcp`` (the SDK's Streamable HTTP in stateless mode, so
any replica can answer any request), the approval page at ``/`` and its JSON API under
``/api/``, ``/healthz`` — behind ``TokenGate`` (tokens, rate limit, Host/Origin checks)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, cast

from ..approval.store import SqliteApprovalStore
from ..errors import ToolkeeperError
from ..extras import require
from ..gateway.gateway import MCPGateway
from ..invoke.invoker import ToolInvoker
from ..mcp.server import PAGE_SIZE, MCPFace
from ..mcp.streams import MemoryEventStore
from ..notify.links import DecisionLinks
from ..skills.skill import Skill
from .auth import WebSessions
from .clients import ClientTokens
from .exchange import SingleExchange, input_schemas
from .gate import LOOPBACK, TokenGate
from .metrics import ServerMetrics
from .notify_links import DecisionLinkPage
from .oauth import OAuthResource
from .tracecontext import ContinuedTrace
from .web import web_routes

__all__ = ["LOOPBACK", "TokenGate", "create_app", "metrics_app", "page_app"]

def create_app(invoker: ToolInvoker, *, token: str | None, host: str = "127.0.0.1",
               clients: ClientTokens | None = None, skills: Sequence[Skill] = (),
               rate_limit: float = 50.0, max_body_bytes: int = 8 << 20,
               gateway: MCPGateway | None = None, sessions: WebSessions | None = None,
               stopping: threading.Event | None = None,
               public_hosts: Sequence[str] = (), anonymous: str | None = None,
               ask_client: bool = False, offers: Sequence[Any] = (),
               keep_sessions: bool = False, oauth: OAuthResource | None = None,
               metrics: ServerMetrics | None = None,
               links: DecisionLinks | None = None) -> TokenGate:
    """The ASGI app of ``toolkeeper serve``, for embedding in an app of your own too.
    With ``sessions`` and a SQLite approval store, the approval page and API are served too.
    ``rate_limit``: requests per second per client (0: no limit). ``public_hosts``: names
    clients reach it by besides ``host`` (behind a load balancer).
    ``token`` is the operator's (the page's API and the CLI; refused on ``/mcp``); clients use
    their own tokens from ``clients`` — or, with ``anonymous`` (loopback only), none: every
    request to ``/mcp`` without a credential is that client's. ``ask_client``: a call that
    needs approval also asks the person at the client (``[approval] channels``).
    With a ``gateway`` (entered and attached by the caller), a tools/list refreshes its
    upstream servers when their listing is older than its ``refresh_s``. ``offers``: the
    resources and prompts declared with ``@resource`` and ``@prompt``. ``keep_sessions``: an
    MCP session per client connection (server-to-client requests on the 2025-11-25 wire,
    resumable streams) instead of stateless answers; one process only. ``oauth``: accept
    OAuth access tokens too (``[server.oauth]``), their scopes deciding each client's tools.
    ``metrics``: serve them at ``/metrics``, to the operator only. A request carrying a W3C
    ``traceparent`` makes its calls' spans part of that trace. ``links``: the single-use
    decision links of notifications (``/notify/{token}``)."""
    require("server", "the toolkeeper serve app")
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import BaseRoute, Route

    async def healthz(_request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "tools": len(invoker.registry.names())})

    names = ({host, *LOOPBACK} if host in LOOPBACK else {host}) | set(public_hosts)
    bare = [f"[{h}]" if ":" in h else h for h in names]
    hosts = bare + [f"{h}:*" for h in bare]  # with and without a port (a proxy may drop it)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts,
        allowed_origins=[f"http://{h}" for h in hosts] + [f"https://{h}" for h in hosts])
    routes: list[BaseRoute] = [Route("/healthz", healthz)]
    if metrics is not None:
        routes.append(Route("/metrics", metrics.endpoint))
    store = invoker.approvals.store
    if sessions is not None and isinstance(store, SqliteApprovalStore):
        routes += web_routes(store, invoker.audit, sessions, stopping=stopping,
                             catalog=invoker.registry, policies=invoker.policies)
    if links is not None and isinstance(store, SqliteApprovalStore):
        routes += DecisionLinkPage(store, invoker.audit, links, catalog=invoker.registry).routes()
    if ask_client and token is None:
        raise ValueError("asking the client needs the operator token (its key seals the "
                         "request state every replica shares)")
    face = MCPFace(invoker, session=None, skills=skills, gateway=gateway, page_size=PAGE_SIZE,
                   ask_client=token if ask_client else None, offers=offers, state_secret=token)
    server = face.build("toolkeeper", None, announces=keep_sessions)

    def tool_name(wire: str) -> str | None:
        try:
            return face.exported_for(wire).names.name(wire)
        except ToolkeeperError:
            return None

    app = server.streamable_http_app(
        streamable_http_path="/mcp", stateless_http=not keep_sessions, host=host,
        event_store=cast(Any, MemoryEventStore()) if keep_sessions else None,
        retry_interval=100 if keep_sessions else None,
        transport_security=security, max_request_body_size=max_body_bytes,
        custom_starlette_routes=routes)  # type: ignore[arg-type]  # a Mount is a route too
    # tools/call and tools/list on the 2025 wire: one request through the SDK's own kernel,
    # answered with one JSON body (an event stream only when the call sends notifications).
    server.get_tool_input_schema = input_schemas(invoker.registry)
    lean = SingleExchange(app, server, security=security, max_body_bytes=max_body_bytes,
                          stopping=stopping)
    gate = TokenGate(ContinuedTrace(lean), token, clients=clients, rate=rate_limit,
                     burst=max(1, int(rate_limit * 2)), sessions=sessions, hosts=tuple(names),
                     anonymous=anonymous, oauth=oauth, tool_name=tool_name,
                     max_body_bytes=max_body_bytes)
    gate.mcp_server = server  # for announce_changes (tools/list_changed to listeners)
    return gate


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


def metrics_app(metrics: ServerMetrics) -> TokenGate:
    """``/metrics`` alone, without a credential, for a port of its own on loopback
    (``toolkeeper serve --metrics-port``): a request naming another Host is refused."""
    from starlette.applications import Starlette
    from starlette.routing import Route

    inner = Starlette(routes=[Route("/metrics", metrics.open_endpoint)])
    return TokenGate(inner, None, hosts=LOOPBACK, protected=(), rate=0)
