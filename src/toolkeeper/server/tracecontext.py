"""A client's trace, continued: an HTTP request that carries W3C trace context (``traceparent``,
``tracestate``, ``baggage`` headers) makes the spans it causes part of that trace. An MCP
request's ``_meta.traceparent`` (SEP-414), which the MCP SDK's own ``tools/call`` span
continues, wins over the header."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..invoke.tracing import continued

if TYPE_CHECKING:
    from .gate import ASGIApp, Receive, Scope, Send

__all__ = ["ContinuedTrace"]

_HEADERS = (b"traceparent", b"tracestate", b"baggage")


class ContinuedTrace:
    """ASGI: run ``app`` inside the trace context the request's headers carry, if any."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        carrier = {key.lower().decode("latin-1"): value.decode("latin-1")
                   for key, value in scope.get("headers", ()) if key.lower() in _HEADERS}
        if scope["type"] != "http" or not carrier:
            await self.app(scope, receive, send)
            return
        with continued(carrier):
            await self.app(scope, receive, send)
