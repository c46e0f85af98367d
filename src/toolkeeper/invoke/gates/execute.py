"""The executor: the only place that runs a tool's code."""

from __future__ import annotations

from ...core.spec import HandlesCalls
from ...errors import ApprovalPending, PolicyViolationError, ToolCallError, ToolRaisedError
from ...tools.tool import Tool
from ..results import InvocationResult
from ..state import Invocation

__all__ = ["execute"]


async def execute(inv: Invocation) -> InvocationResult:
    """Run the tool with its final arguments; its exception becomes ``ToolRaisedError`` (but
    ``ApprovalPending``: a tool that waits for a person, as a paused code-mode run does)."""
    tool = inv.known_tool
    try:
        if tool.kind == "provider" and isinstance(tool, HandlesCalls):
            result = await tool.handle_call(inv.call, inv.context())
        elif not isinstance(tool, Tool):
            raise PolicyViolationError(
                f"tool '{inv.call.name}' is a {tool.kind} tool and is not run here; only function "
                "tools and provider-defined tools run in toolkeeper", tool_name=inv.call.name)
        else:
            wants_ctx = inv.ctx is not None or tool._ctx_param() is not None
            value = await tool.call_async(inv.arguments, inv.context() if wants_ctx else None)
            result = tool.to_result(value)
    except (ToolCallError, ApprovalPending):
        raise
    except Exception as exc:
        raise ToolRaisedError(f"tool '{inv.call.name}' failed: {type(exc).__name__}: {exc}",
                              tool_name=inv.call.name, details={"exception": type(exc).__name__}
                              ) from exc
    if result.is_error and result.error_code is None:
        result = result.model_copy(update={"error_code": "tool_error"})
    return InvocationResult(status="error" if result.is_error else "ok", result=result, ran=True,
                            **inv.envelope())
