"""The HTTP face: the MCP endpoint at ``/mcp`` (the SDK's Streamable HTTP in stateless mode, so
any replica can answer any request), ``/healthz``, a bearer-token gate and the SDK's
DNS-rebinding protection (a foreign ``Host`` or ``Origin`` is refused)."""

from __future__ import annotations

import hmac
import json
import time
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

from ..invoke.invoker import ToolInvoker
from ..mcp.gateway import MCPGateway
from ..mcp.server import mcp_server
from ..skills.skill import Skill
from .clients import OPERATOR, ClientTokens

__all__ = ["LOOPBACK", "TokenGate", "create_app"]

LOOPBACK = ("127.0.0.1", "localhost", "::1")
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class TokenGate:
    """Refuses requests under ``protected`` paths without ``Authorization: Bearer <token>``: the
    operator's token (compared in constant time) or a client's (by digest). The client's name
    goes into the request's state (``toolkeeper_client``) for the layers below. ``token=None``
    lets everything through as the operator (``--auth none``, loopback only)."""

    def __init__(self, app: ASGIApp, token: str | None, *, clients: ClientTokens | None = None,
                 rate: float = 50.0, burst: int = 100,
                 protected: tuple[str, ...] = ("/mcp", "/api")) -> None:
        self.app = app
        self.token = token.encode() if token is not None else None
        self.clients = clients
        self.protected = protected
        self.rate, self.burst = rate, burst
        self.mcp_server: Any = None
        """The MCP ``Server`` behind it, when ``create_app`` made it."""
        self._buckets: dict[str, tuple[float, float]] = {}
        """client → (tokens left, when counted): a token bucket of ``rate`` requests per second
        with room for ``burst``."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(self.protected):
            await self.app(scope, receive, send)
            return
        client = self._client(scope)
        if client is None:
            await _refuse(send, 401, "unauthorized", (b"www-authenticate", b"Bearer"),
                          "missing or wrong bearer token: send 'Authorization: Bearer <token>' "
                          "with the token toolkeeper serve printed (or TOOLKEEPER_TOKEN)")
            return
        if not self._admit(client):
            await _refuse(send, 429, "rate_limited", (b"retry-after", b"1"),
                          f"more than {self.rate:g} requests per second from client "
                          f"{client!r}; slow down and retry")
            return
        scope.setdefault("state", {})["toolkeeper_client"] = client
        await self.app(scope, receive, send)

    def _admit(self, client: str) -> bool:
        now = time.monotonic()
        left, then = self._buckets.get(client, (float(self.burst), now))
        left = min(float(self.burst), left + (now - then) * self.rate)
        if left < 1.0:
            self._buckets[client] = (left, now)
            return False
        self._buckets[client] = (left - 1.0, now)
        return True

    def _client(self, scope: Scope) -> str | None:
        if self.token is None:
            return OPERATOR
        for key, value in scope.get("headers", ()):
            if key == b"authorization" and value[:7].lower() == b"bearer ":
                presented = value[7:].strip()
                if hmac.compare_digest(presented, self.token):
                    return OPERATOR
                if self.clients is not None:
                    return self.clients.client_for(presented.decode("latin-1"))
        return None


async def _refuse(send: Send, status: int, error: str, header: tuple[bytes, bytes],
                  message: str) -> None:
    body = json.dumps({"error": error, "message": message}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), header,
        (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def create_app(invoker: ToolInvoker, *, token: str | None, host: str = "127.0.0.1",
               clients: ClientTokens | None = None, skills: Sequence[Skill] = (),
               rate_limit: float = 50.0, max_body_bytes: int = 4 << 20,
               gateway: MCPGateway | None = None) -> ASGIApp:
    """The ASGI app of ``toolkeeper serve``, for embedding in an app of your own too.
    With a ``gateway`` (entered and attached by the caller), a tools/list refreshes its
    upstream servers when their listing is older than its ``refresh_s``."""
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def healthz(_request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "tools": len(invoker.registry.names())})

    names = {host, *LOOPBACK} if host in LOOPBACK else {host}
    hosts = [f"[{h}]:*" if ":" in h else f"{h}:*" for h in names]
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts,
        allowed_origins=[f"http://{h}" for h in hosts] + [f"https://{h}" for h in hosts])
    server = mcp_server(invoker, skills=skills, gateway=gateway)
    app = server.streamable_http_app(
        streamable_http_path="/mcp", stateless_http=True, host=host,
        transport_security=security, max_request_body_size=max_body_bytes,
        custom_starlette_routes=[Route("/healthz", healthz)])
    gate = TokenGate(app, token, clients=clients, rate=rate_limit,
                     burst=max(1, int(rate_limit * 2)))
    gate.mcp_server = server  # for announce_changes (tools/list_changed to listeners)
    return gate
