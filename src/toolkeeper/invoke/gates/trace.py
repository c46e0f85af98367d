"""Trace: the outermost gate — each call is an OpenTelemetry span, ``execute_tool {tool}``, as
OpenTelemetry's GenAI conventions name a tool's execution, with what the gates decided.

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
    OPERATION_NAME,
    REFUSED_BY,
    TOOL_CALL_ID,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    TOOL_TYPE,
    TracerSource,
    failed,
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
        call, tool = inv.call, inv.tool
        attributes: dict[str, str] = {
            OPERATION_NAME: EXECUTE_TOOL, TOOL_NAME: call.name, TOOL_CALL_ID: call.id,
            TOOL_TYPE: tool_type(tool), "toolkeeper.session.id": inv.session.id}
        if tool is not None and tool.description:
            attributes[TOOL_DESCRIPTION] = tool.description[:1000]
        client = inv.session.caller.client
        if client:
            attributes["toolkeeper.client"] = client
        with span(tracer, f"{EXECUTE_TOOL} {call.name}", attributes) as current:
            try:
                result = await call_next(inv)
            except BaseException:  # the caller's cancellation: recorded, then raised
                current.set_attribute("toolkeeper.status", "cancelled")
                failed(current, "cancelled")
                raise
            _outcome(current, inv, result)
            return result


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
    gate = REFUSED_BY.get(code)
    if gate is not None:
        current.set_attribute("toolkeeper.gate", gate)
        current.add_event("toolkeeper.refused", {"toolkeeper.gate": gate, ERROR_TYPE: code})
