"""Cancellation: a cancelled run starts no further tool."""

from __future__ import annotations

from ..results import InvocationResult
from ..state import Gate, Invocation, Next

__all__ = ["CancellationGate"]


class CancellationGate(Gate):
    name = "cancellation"
    only_with = "ctx"

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        if inv.ctx is not None:
            inv.ctx.check()
        return await call_next(inv)
