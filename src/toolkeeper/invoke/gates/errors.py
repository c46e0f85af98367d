"""The outermost gate: any exception becomes exactly one result."""

from __future__ import annotations

import logging

from ...errors import (
    ApprovalDeniedError,
    ApprovalPending,
    GuardrailTrippedError,
    PolicyViolationError,
    ToolCallError,
)
from ..results import InvocationResult, Status
from ..state import Gate, Invocation, Next

__all__ = ["ErrorGate", "result_for"]

log = logging.getLogger("toolkeeper.invoke")
_DENIED = (ApprovalDeniedError, GuardrailTrippedError, PolicyViolationError)


def result_for(inv: Invocation, exc: Exception) -> InvocationResult:
    """The result that tells the model what went wrong (never a traceback)."""
    call_id, tool = inv.call.id, inv.call.name
    if isinstance(exc, ApprovalPending):
        return InvocationResult(status="pending", text=str(exc), error_code=exc.code,
                                approval_id=exc.request_id, call_id=call_id, tool=tool)
    if isinstance(exc, ToolCallError):
        status: Status = "denied" if isinstance(exc, _DENIED) else "error"
        return InvocationResult(status=status, text=exc.message, error_code=exc.code,
                                call_id=call_id, tool=tool)
    log.exception("invoker error while calling %s", tool)
    return InvocationResult(
        status="error", error_code="invoker_error", call_id=call_id, tool=tool,
        text=f"the tool call could not be completed ({type(exc).__name__}: {exc})")


class ErrorGate(Gate):
    name = "errors"

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        try:
            return await call_next(inv)
        except Exception as exc:
            return result_for(inv, exc)
