"""The gate in front of the HTTP face: who is asking (a bearer token or the page's cookie),
in which role, how fast, and whether the request really comes from this server's own address
and page.

Two roles, never one credential for both: a **client** (an agent: a client token, or nothing
under ``--auth none``) calls tools on ``/mcp`` and reads its own requests under ``/api``; the
**operator** (a person: the operator token, or the page's login cookie) decides, on the page,
the API and the CLI, and is refused on ``/mcp`` — an agent configured with a credential that
can approve could approve its own calls."""
from __future__ import annotations

from collections.abc import Callable, Sequence

from .auth import WebSessions
from .clients import ClientTokens
from .gate_layers import (
    CSP,
    LOOPBACK,
    OPERATOR_ON_MCP,
    OPERATOR_PATHS,
    ASGIApp,
    Asked,
    Credentials,
    Identified,
    Layer,
    Metadata,
    RateLimit,
    Receive,
    Required,
    Roles,
    SameOrigin,
    Scope,
    Send,
    Shared,
    ToolScope,
)
from .oauth import OAuthResource

__all__ = ["CSP", "LOOPBACK", "OPERATOR_ON_MCP", "OPERATOR_PATHS", "ASGIApp", "Receive", "Scope",
           "Send", "TokenGate"]


class TokenGate:
    """The door of the HTTP face.

    - ``/mcp``: a client's ``Authorization: Bearer <token>`` (by digest), else 401 — or, with
      ``anonymous`` set (``--auth none``, loopback only), no credential at all, as the client
      of that name. The operator's credential is refused here (403, ``OPERATOR_ON_MCP``).
    - ``/api``: the operator's bearer ``token`` (compared in constant time; ``None``: there is
      none, only the page's login cookie), a client's token (its own requests, read-only), or
      the approval page's session cookie (the operator's); else 401.
    - Who asks goes into the request's state as a ``Caller`` (``CALLER_KEY``): the client's
      name, the channel (mcp, api, page), how it proved it and the page session's secret.
    - Every other path (the page): a ``Host`` that is not one of ``hosts`` is refused (DNS
      rebinding; the SDK checks ``/mcp`` itself), a state-changing request whose ``Origin`` is
      not exactly this server's is refused, and every answer carries a strict
      Content-Security-Policy, ``X-Frame-Options: DENY``, ``nosniff`` and ``Referrer-Policy: same-origin``.
    - A token bucket of ``rate`` requests per second per caller (``rate`` 0: no limit): per
      client for a credential; without one (``--auth none``, where every local process is the
      same client), per connection — one caller flooding is refused, the others are not.
    - With ``oauth``, an OAuth 2.1 protected resource too (``oauth.py``): its metadata is
      public, a bearer that is no token of ours is checked as a JWT access token (its scopes
      decide the client's tools: a ``tools/call`` of another is refused 403
      ``insufficient_scope``, ``tool_name`` mapping the wire name back), and a 401 names where
      the metadata is. It is checked on ``OPERATOR_PATHS`` too (``/metrics``: the operator scope
      reads it).

    The gate is its layers, in order, each one job (``gate_layers.py``): the OAuth metadata,
    who asks, the roles, the same-origin checks, the credential required, the rate limit,
    the token's tool scope, and who asks written into the request's state.
    """

    def __init__(self, app: ASGIApp, token: str | None, *, clients: ClientTokens | None = None,
                 rate: float = 50.0, burst: int = 100, shared: Shared | None = None,
                 protected: tuple[str, ...] = ("/mcp", "/api"),
                 sessions: WebSessions | None = None,
                 hosts: Sequence[str] = LOOPBACK, anonymous: str | None = None,
                 oauth: OAuthResource | None = None,
                 tool_name: Callable[[str], str | None] | None = None,
                 max_body_bytes: int = 8 << 20) -> None:
        self.app = app
        self.layers: tuple[Layer, ...] = (
            Metadata(oauth),
            Credentials(token, clients=clients, sessions=sessions, oauth=oauth,
                        protected=protected),
            Roles(anonymous),
            SameOrigin(hosts),
            Required(protected, oauth),
            RateLimit(rate, burst, shared),
            ToolScope(oauth, tool_name, max_body_bytes),
            Identified())
        """What each request meets, in order (``starlette``'s middleware stack, as data)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        asked = Asked(scope, scope["path"], {k.lower(): v for k, v in scope.get("headers", ())})
        for layer in self.layers:
            passed = await layer(asked, receive, send)
            if passed is None:
                return
            receive, send = passed
        await self.app(scope, receive, send)
