"""``ToolCallResult``, ``ErrorResult`` and ``ResultList`` under toolregistry's module path
(``toolregistry.llm.tool_calls``)."""

from ..results import ErrorResult, ResultList, ToolCallResult

__all__ = ["ErrorResult", "ResultList", "ToolCallResult"]
