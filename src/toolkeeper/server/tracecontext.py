"""A client's trace, continued: an HTTP request that carries W3C trace context (``traceparent``,
``tracestate``, ``baggage`` headers) makes the spans it causes part of that trace. An MCP
request's ``_meta.traceparent`` (SEP-414), which the MCP SDK's own ``tools/call`` span
continues, wins over the header.

No tracing work without a tracer: the SDK's OpenTelemetry middleware (a span per request,
on by default, a no-op span while no tracer provider is set up, yet about a tenth of a call
under load) runs only once one is (``WhenTraced``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..invoke.tracing import TracerSource, continued

if TYPE_CHECKING:
    from .gate import ASGIApp, Receive, Scope, Send

__all__ = ["ContinuedTrace", "WhenTraced", "traced_only"]

Middleware = Callable[[Any, Callable[[Any], Awaitable[Any]]], Awaitable[Any]]
"""An MCP server's middleware: ``(ctx, call_next) -> result``."""

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


class WhenTraced:
    """An MCP server middleware that runs ``inner`` only while a tracer provider is set up
    (the global one, checked per request as the door checks it); else the request goes
    straight on."""

    def __init__(self, inner: Middleware) -> None:
        self.inner = inner
        self.source = TracerSource()

    def __call__(self, ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Awaitable[Any]:
        if self.source.tracer() is None:
            return call_next(ctx)
        return self.inner(ctx, call_next)


def traced_only(middleware: list[Any]) -> None:
    """Wrap the MCP SDK's OpenTelemetry middleware in ``middleware`` (a ``Server``'s list,
    the SDK's documented place to opt out of it) in ``WhenTraced``. It is found by its class
    name: should the SDK rename it, it keeps running, as before."""
    for n, item in enumerate(middleware):
        kind = type(item)
        if kind.__name__ == "OpenTelemetryMiddleware" and kind.__module__.startswith("mcp."):
            middleware[n] = WhenTraced(item)
