"""Kind: hosted tools are not run here; a chain may not call the chain tool."""

from __future__ import annotations

from ...core.spec import ToolLike
from ...errors import ToolNotCallableError
from ..results import InvocationResult
from ..state import Gate, Invocation, Next

__all__ = ["KindGate"]


class KindGate(Gate):
    name = "kind"

    def needed(self, tool: ToolLike) -> bool:
        return tool.kind == "hosted" or tool.runs_scripts

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        tool = inv.known_tool
        if tool.kind == "hosted":
            raise ToolNotCallableError(
                f"tool '{tool.name}' is hosted by the provider and runs there; its result arrives "
                "in the provider's next response", tool_name=tool.name)
        if inv.session.chain and tool.runs_scripts:
            raise ToolNotCallableError(
                f"tool '{tool.name}' runs code-mode scripts and cannot be called from inside one; "
                "call the tools you need directly", tool_name=tool.name)
        return await call_next(inv)
