"""OpenTelemetry for the door: the names of OpenTelemetry's GenAI conventions for a tool's
execution, the span a call gets (``execute_tool {tool}``), and a trace context carried in from
outside (an HTTP request's ``traceparent``, an MCP request's ``_meta``).

Only ``opentelemetry-api`` is used, and only once the application uses OpenTelemetry itself:
until something has imported ``opentelemetry.trace`` (an SDK set up, an instrumentation, a
provider given to the invoker) nothing of it is imported — toolkeeper does not depend on it —
and without a tracer provider set up no span is made; the door checks that once per call.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..core.spec import ToolLike

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider
    from opentelemetry.util.types import AttributeValue

__all__ = ["ERROR_TYPE", "EXECUTE_TOOL", "INVOKE", "OPERATION_NAME", "REFUSED_BY", "TOOL_CALL_ID",
           "TOOL_DESCRIPTION", "TOOL_NAME", "TOOL_TYPE", "TRACER_NAME", "TracerSource",
           "continued", "failed", "inside_execute_tool", "span", "tool_type"]

TRACER_NAME = "toolkeeper"
OPERATION_NAME = "gen_ai.operation.name"
EXECUTE_TOOL = "execute_tool"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_DESCRIPTION = "gen_ai.tool.description"
ERROR_TYPE = "error.type"
INVOKE = "toolkeeper.invoke"
"""The span's name (``toolkeeper.invoke {tool}``) when a framework already made the call's
``execute_tool`` span (pydantic-ai's instrumentation): ours is its child, not a second one."""

REFUSED_BY = {
    "budget_exceeded": "budget", "unknown_tool": "lookup", "malformed_call": "lookup",
    "policy_violation": "lookup", "not_callable": "kind", "invalid_arguments": "validate",
    "denied": "approval", "pending": "approval", "expired": "approval",
    "cancelled": "cancellation",
    "timeout": "timeout", "guardrail_tripped": "guardrails",
}
"""Which gate answers a call with each error code (``guardrails``: a guardrail on the arguments
or on the result): the span's ``toolkeeper.gate``."""

_API = "opentelemetry.trace"
_CARRIER_KEYS = ("traceparent", "tracestate", "baggage")
_ASK = object()
_FROM_ENVIRONMENT = ("OTEL_PYTHON_TRACER_PROVIDER" in os.environ
                     and importlib.util.find_spec("opentelemetry") is not None)

try:
    _VERSION = version("toolkeeper")
except PackageNotFoundError:  # a source tree that was never installed
    _VERSION = "0"


def tool_type(tool: ToolLike | None) -> str:
    """``gen_ai.tool.type``: ``extension`` for a tool that runs elsewhere (another MCP server's
    through the gateway, a provider-defined tool the application answers), else ``function``."""
    if tool is None:
        return "function"
    if tool.kind == "provider" or "mcp" in tool.metadata.tags:
        return "extension"
    return "function"


class TracerSource:
    """The tracer a call's span comes from: the given provider's, else the global one's — or
    ``None`` while no SDK is set up (OpenTelemetry not imported at all, or its global provider
    still the API's proxy or no-op), so an untraced door makes no span."""

    __slots__ = ("_provider", "_seen", "_tracer")

    def __init__(self, provider: TracerProvider | None = None) -> None:
        self._provider = provider
        self._seen: TracerProvider | None = None
        self._tracer: Tracer | None = None

    def tracer(self) -> Tracer | None:
        provider = self._provider
        if provider is None:
            api = sys.modules.get(_API)
            if api is None and not _FROM_ENVIRONMENT:
                return None  # nothing in this process uses OpenTelemetry
            # Its own get_tracer_provider() reads os.environ on every call while none is set
            # (about 1 µs): the global is read first, the API asked only once one is set.
            current: object = getattr(api, "_TRACER_PROVIDER", _ASK)
            if current is None and not _FROM_ENVIRONMENT:
                return None
            from opentelemetry import trace

            provider = trace.get_tracer_provider()
        if provider is self._seen:
            return self._tracer
        from opentelemetry.trace import NoOpTracerProvider, ProxyTracerProvider

        off = isinstance(provider, ProxyTracerProvider | NoOpTracerProvider)
        self._seen = provider
        self._tracer = None if off else provider.get_tracer(TRACER_NAME, _VERSION)
        return self._tracer


@runtime_checkable
class _Readable(Protocol):
    """A span whose attributes can be read back (the SDK's spans are)."""

    @property
    def attributes(self) -> Mapping[str, object] | None: ...


def inside_execute_tool(call_id: str) -> bool:
    """Whether the current span is already an ``execute_tool`` span of this call: a framework's
    own instrumentation (pydantic-ai's) made it, with the same ``gen_ai.tool.call.id``, around
    the tool it runs through the door. A span without a call id (the MCP SDK's ``tools/call``,
    the request) or with another (a code-mode run's) is a parent like any other."""
    from opentelemetry import trace

    current = trace.get_current_span()
    if not call_id or not current.is_recording() or not isinstance(current, _Readable):
        return False
    attributes = current.attributes or {}
    return attributes.get(OPERATION_NAME) == EXECUTE_TOOL and \
        attributes.get(TOOL_CALL_ID) == call_id


def span(tracer: Tracer, name: str, attributes: Mapping[str, AttributeValue]
         ) -> AbstractContextManager[Span]:
    """An ``INTERNAL`` span, current while the block runs; exceptions are the caller's to
    record (``failed``)."""
    from opentelemetry.trace import SpanKind

    return tracer.start_as_current_span(name, kind=SpanKind.INTERNAL, attributes=attributes,
                                        record_exception=False, set_status_on_exception=False)


def failed(span: Span, error_type: str) -> None:
    """Mark ``span`` as failed: ``error.type`` and the status ``ERROR``, described by that
    type alone. Never a message: an error's text may repeat what the call carried (a value
    a validator echoes, a path in a tool's exception), and a span leaves the process."""
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute(ERROR_TYPE, error_type)
    span.set_status(Status(StatusCode.ERROR, error_type))


@contextmanager
def continued(carrier: Mapping[str, object] | None) -> Iterator[None]:
    """Continue the trace ``carrier`` names (W3C ``traceparent``, ``tracestate``, ``baggage``:
    an HTTP request's headers, an MCP request's ``_meta``) while the block runs; a carrier
    without one, or with one that does not parse, leaves the current context as it is."""
    found = {k: v for k in _CARRIER_KEYS
             if carrier is not None and isinstance(v := carrier.get(k), str)}
    if "traceparent" not in found:
        yield
        return
    from opentelemetry import context, trace
    from opentelemetry.propagate import extract

    parent = extract(found)
    if not trace.get_current_span(parent).get_span_context().is_valid:
        yield
        return
    token = context.attach(parent)
    try:
        yield
    finally:
        context.detach(token)
