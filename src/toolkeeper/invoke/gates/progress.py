"""Progress: TOOL_CALL before and TOOL_RESULT after, so a UI can see inside a run."""

from __future__ import annotations

import inspect

from ..results import InvocationResult
from ..state import Gate, Invocation, Next

__all__ = ["ProgressGate"]


async def _emit(inv: Invocation, step: dict[str, object]) -> None:
    sink = inv.progress_sink
    if sink is not None:
        outcome = sink(step)
        if inspect.isawaitable(outcome):
            await outcome


class ProgressGate(Gate):
    name = "progress"
    only_with = "progress_sink"

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        if inv.progress_sink is None:
            return await call_next(inv)
        await _emit(inv, {"type": "tool_call", "tool": inv.call.name, "call_id": inv.call.id})
        result = await call_next(inv)
        await _emit(inv, {"type": "tool_result", "tool": inv.call.name, "call_id": inv.call.id,
                          "status": result.status})
        return result
