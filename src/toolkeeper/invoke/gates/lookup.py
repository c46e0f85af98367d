"""Lookup: the call names a tool the catalog offers (else the closest names are suggested)."""

from __future__ import annotations

from ...errors import MalformedCallError, UnknownToolError
from ..results import InvocationResult
from ..state import Gate, Invocation, Next

__all__ = ["LookupGate"]


class LookupGate(Gate):
    name = "lookup"

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        problem = inv.call.problem
        if problem is not None:
            cls = UnknownToolError if problem.code == "unknown_tool" else MalformedCallError
            raise cls(problem.message, tool_name=inv.call.name or None)
        tool = inv.invoker.registry.get(inv.call.name)
        if tool is None:
            raise inv.invoker.registry.unknown(inv.call.name)
        return await call_next(inv.evolve(tool=tool))
