"""The executor: the only place that runs a tool's code."""

from __future__ import annotations

from ...errors import ToolCallError, ToolRaisedError
from ...tools.hosted import is_provider_defined_tool
from ..results import InvocationResult
from ..state import Invocation

__all__ = ["execute"]


async def execute(inv: Invocation) -> InvocationResult:
    """Run the tool with its final arguments; its exception becomes ``ToolRaisedError``."""
    tool = inv.tool
    try:
        if is_provider_defined_tool(tool):
            result = await tool.handle_call(inv.call, inv.context())
        else:
            wants_ctx = inv.ctx is not None or tool._ctx_param() is not None
            value = await tool.call_async(inv.arguments, inv.context() if wants_ctx else None)
            result = tool.to_result(value)
    except ToolCallError:
        raise
    except Exception as exc:
        raise ToolRaisedError(f"tool '{inv.call.name}' failed: {type(exc).__name__}: {exc}",
                              tool_name=inv.call.name, details={"exception": type(exc).__name__}
                              ) from exc
    return InvocationResult(
        status="error" if result.is_error else "ok", text=result.text,
        structured=result.structured_content, result=result, call_id=inv.call.id,
        tool=inv.call.name, approval_id=inv.approval_id or inv.pre_approved,
        error_code=(result.error_code or "tool_error") if result.is_error else None)
