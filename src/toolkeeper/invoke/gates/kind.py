"""Kind (the type gate): hosted tools are not run here; inside a code-mode chain, neither
a hosted nor a provider-defined tool nor the chain tool itself may be called — the model is told
to call it outside the chain."""

from __future__ import annotations

from ...core.spec import ToolLike
from ...errors import ToolNotCallableError
from ..results import InvocationResult
from ..state import Gate, Invocation, Next

__all__ = ["KindGate"]

OUTSIDE = "call it outside the chain, as a tool call of your own turn"


class KindGate(Gate):
    name = "kind"

    def needed(self, tool: ToolLike) -> bool:
        return tool.kind != "function" or tool.runs_scripts

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        tool = inv.known_tool
        chain = inv.session.chain
        if tool.kind == "hosted":
            raise ToolNotCallableError(
                f"tool '{tool.name}' is hosted by the provider and runs there; "
                + (f"it cannot be called from a chain: {OUTSIDE}" if chain else
                   "its result arrives in the provider's next response"), tool_name=tool.name)
        if chain and tool.kind == "provider":
            raise ToolNotCallableError(
                f"tool '{tool.name}' is defined by the provider (its calls come in the "
                f"provider's response) and cannot be called from a chain: {OUTSIDE}",
                tool_name=tool.name)
        if chain and tool.runs_scripts:
            raise ToolNotCallableError(
                f"tool '{tool.name}' runs code-mode scripts (no chain inside a chain) and cannot "
                f"be called from a chain: {OUTSIDE}, or call the tools you need directly in this "
                "script", tool_name=tool.name)
        return await call_next(inv)
