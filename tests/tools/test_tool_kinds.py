"""The three kinds of tool, written the way agent code writes them: a local ``Tool`` is any
object with ``name``, ``description``, ``input_schema`` and ``async execute(ctx, **kwargs)`` (no
base class), and the runtime dispatch checks ``is_provider_defined_tool`` before
``is_hosted_tool``."""

from __future__ import annotations

from typing import Any, ClassVar

from toolkeeper import (
    AutoApprovalHandler,
    HostedTool,
    ProviderDefinedTool,
    Toolbox,
    ToolCall,
    ToolContext,
    ToolExecutionResult,
    ToolInvoker,
    ToolRisk,
    is_hosted_tool,
    is_provider_defined_tool,
)


class CalculatorTool:
    name = "calculator"
    description = "Add two numbers"
    input_schema: ClassVar[dict[str, Any]] = {"type": "object", "required": ["a", "b"],
                    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}

    def __init__(self) -> None:
        self.contexts: list[object] = []

    async def execute(self, ctx: Any, **kwargs: Any) -> ToolExecutionResult:
        self.contexts.append(ctx)
        return ToolExecutionResult(content=[{"type": "text", "text": str(kwargs["a"] + kwargs["b"])}],
                                   structured_content={"sum": kwargs["a"] + kwargs["b"]})


class DeleteFileTool:
    name = "delete_file"
    description = "Delete a file"
    input_schema: ClassVar[dict[str, Any]] = {"type": "object", "properties": {"path": {"type": "string"}},
                    "required": ["path"]}
    risk = ToolRisk.HIGH

    def __init__(self) -> None:
        self.deleted: list[str] = []

    async def execute(self, ctx: Any, **kwargs: Any) -> ToolExecutionResult:
        self.deleted.append(kwargs["path"])
        return ToolExecutionResult(content=[{"type": "text", "text": "deleted"}])


def test_a_protocol_tool_runs_through_the_invoker_with_its_context() -> None:
    calculator = CalculatorTool()
    box = Toolbox()
    box.add(calculator)
    result = ToolInvoker(box).invoke_sync(
        ToolCall(id="c1", name="calculator", arguments={"a": 1, "b": "2"}))
    assert (result.status, result.text, result.structured) == ("ok", "3", {"sum": 3})
    assert isinstance(calculator.contexts[0], ToolContext)
    refused = ToolInvoker(box).invoke_sync(ToolCall(id="c2", name="calculator",
                                                    arguments={"a": 1}))
    assert refused.status == "error" and "'b'" in refused.text  # validated against input_schema


def test_a_protocol_tools_risk_is_honoured() -> None:
    deleter = DeleteFileTool()
    call = ToolCall(id="d1", name="delete_file", arguments={"path": "a.txt"})
    assert ToolInvoker([deleter]).invoke_sync(call).status == "denied"
    assert deleter.deleted == []
    approved = ToolInvoker([deleter], approval_handler=AutoApprovalHandler()).invoke_sync(call)
    assert approved.status == "ok" and deleter.deleted == ["a.txt"]


class ComputerTool(ProviderDefinedTool):
    call_types = ("computer_call",)

    async def handle_call(self, call: ToolCall, ctx: ToolContext | None) -> ToolExecutionResult:
        return ToolExecutionResult(content=[{"type": "text", "text": "clicked"}])


def test_the_runtime_dispatch_pattern_sorts_the_three_kinds() -> None:
    web = HostedTool(name="web_search", provider_specs={
        "openai-responses": {"type": "web_search_preview"}})
    computer = ComputerTool(name="computer", provider_specs={
        "openai-responses": {"type": "computer_use_preview"}})
    box = Toolbox([CalculatorTool(), web, computer])
    kinds = {}
    for tool in box.all():
        if is_provider_defined_tool(tool):
            kinds[tool.name] = "handle_call"
        elif is_hosted_tool(tool):
            kinds[tool.name] = "skip"
        else:
            kinds[tool.name] = "execute"
    assert kinds == {"calculator": "execute", "web_search": "skip", "computer": "handle_call"}
