"""The call side: ``ToolCall`` (the invoker pipeline lands here too)."""

from .call import CallProblem, ToolCall

__all__ = ["CallProblem", "ToolCall"]
