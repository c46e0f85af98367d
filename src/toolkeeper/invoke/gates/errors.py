"""The error gate: any exception becomes exactly one result."""

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
    envelope = inv.envelope()
    if isinstance(exc, ApprovalPending):
        envelope["approval_id"] = exc.request_id
        return InvocationResult.failed("pending", str(exc), exc.code, **envelope)
    if isinstance(exc, ToolCallError):
        status: Status = "denied" if isinstance(exc, _DENIED) else "error"
        return InvocationResult.failed(status, exc.message, exc.code, ran=exc.did_run,
                                       **envelope)  # ran and failed: raised, timed out
    log.exception("invoker error while calling %s", inv.call.name)
    return InvocationResult.failed(
        "error", f"the tool call could not be completed ({type(exc).__name__}: {exc})",
        "invoker_error", **envelope)


class ErrorGate(Gate):
    name = "errors"

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        try:
            return await call_next(inv)
        except Exception as exc:
            return result_for(inv, exc)
