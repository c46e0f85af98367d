"""Trace: the outermost gate — each call is an OpenTelemetry span, ``execute_tool {tool}``, as
OpenTelemetry's GenAI conventions name a tool's execution, with what the gates decided.

When a framework's instrumentation already made the call's ``execute_tool`` span (pydantic-ai's
wraps the tool it runs through the door: the current span, with the same call id), the gate's
span is its child named
``toolkeeper.invoke {tool}``, without the GenAI operation name: one ``execute_tool`` per call,
with the gates' outcome under it.

Without a tracer provider set up (no SDK) the gate passes the call on and makes no span.
Inside the span the call's own work (an upstream request, a code-mode run, the tool's own
spans) is its child. Arguments and results are never put on a span — nor any error's text,
which may repeat them: a failed call's span carries its code and the gate that refused it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..results import InvocationResult
from ..state import Gate, Invocation, Next
from ..tracing import (
    ERROR_TYPE,
    EXECUTE_TOOL,
    INVOKE,
    OPERATION_NAME,
    REFUSED_BY,
    TOOL_CALL_ID,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    TOOL_TYPE,
    TracerSource,
    failed,
    inside_execute_tool,
    span,
    tool_type,
)

if TYPE_CHECKING:
    from opentelemetry.trace import Span

__all__ = ["TraceGate"]


class TraceGate(Gate):
    """``source``: where spans go (``TracerSource``: a given provider, else the global one,
    looked at on each call, so one set up later is used from then on)."""

    name = "trace"

    def __init__(self, source: TracerSource | None = None) -> None:
        self.source = source or TracerSource()

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        tracer = self.source.tracer()
        if tracer is None:
            return await call_next(inv)
        call = inv.call
        nested = inside_execute_tool(call.id)
        name = f"{INVOKE if nested else EXECUTE_TOOL} {call.name}"
        with span(tracer, name, _attributes(inv, nested=nested)) as current:
            try:
                result = await call_next(inv)
            except BaseException:  # the caller's cancellation: recorded, then raised
                current.set_attribute("toolkeeper.status", "cancelled")
                failed(current, "cancelled")
                raise
            _outcome(current, inv, result)
            return result


def _attributes(inv: Invocation, *, nested: bool) -> dict[str, str]:
    """The span's attributes; nested in a framework's ``execute_tool`` span, the GenAI
    operation is the framework's and ours names the call only."""
    call, tool = inv.call, inv.tool
    attributes = {TOOL_NAME: call.name, TOOL_CALL_ID: call.id,
                  "toolkeeper.session.id": inv.session.id}
    if not nested:
        attributes |= {OPERATION_NAME: EXECUTE_TOOL, TOOL_TYPE: tool_type(tool)}
        if tool is not None and tool.description:
            attributes[TOOL_DESCRIPTION] = tool.description[:1000]
    client = inv.session.caller.client
    if client:
        attributes["toolkeeper.client"] = client
    return attributes


def _outcome(current: Span, inv: Invocation, result: InvocationResult) -> None:
    """What the gates made of the call, on its span."""
    current.set_attribute("toolkeeper.status", result.status)
    current.set_attribute("toolkeeper.ran", result.ran)
    trail = inv.approval
    if trail is not None and trail.id is not None:
        approval: dict[str, str | float] = {"toolkeeper.approval.id": trail.id}
        if trail.outcome is not None:
            approval["toolkeeper.approval.outcome"] = trail.outcome
        if trail.approver is not None:
            approval["toolkeeper.approval.decided_by"] = trail.approver
        if trail.waited_s is not None:
            approval["toolkeeper.approval.wait_s"] = round(trail.waited_s, 6)
        current.set_attributes(approval)
        current.add_event("toolkeeper.approval", approval)
    if result.artifact_ref is not None:
        current.set_attribute("toolkeeper.artifact.ref", result.artifact_ref)
        current.add_event("toolkeeper.artifact.offloaded",
                          {"toolkeeper.artifact.ref": result.artifact_ref})
    code = result.error_code
    if result.status == "ok" or code is None:
        return
    if result.status == "pending":
        current.set_attribute("toolkeeper.gate", "approval")
        return
    failed(current, code)  # the code: the result's text is the model's, not telemetry's
    gate = result.refused_by or REFUSED_BY.get(code)
    if gate is not None:
        current.set_attribute("toolkeeper.gate", gate)
        current.add_event("toolkeeper.refused", {"toolkeeper.gate": gate, ERROR_TYPE: code})
