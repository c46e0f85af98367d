"""Budget: per session, per tool and per namespace, counted before anything else happens."""

from __future__ import annotations

from ..results import InvocationResult
from ..state import Gate, Invocation, Next

__all__ = ["BudgetGate"]


class BudgetGate(Gate):
    name = "budget"

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        if inv.pre_approved is None:  # a resumed call was counted when it was first made
            inv.session.reserve(inv.call.name, inv.tool.namespace if inv.tool is not None else None)
        return await call_next(inv)
