"""The registry library's documented ``Tool`` examples and a capability registry's ``BaseTool``
examples, adapted only in imports."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from toolkeeper import (
    AutoApprovalHandler,
    BaseTool,
    HitlMode,
    Tool,
    ToolCall,
    ToolInvoker,
    ToolResult,
    ToolRisk,
)
from toolkeeper.errors import UsageError


def test_a_tool_from_a_raw_schema_and_a_callable() -> None:
    def calculate_area(length: float, width: float) -> float:
        """Calculate the area of a rectangle."""
        return length * width

    area_tool = Tool(
        name="calculate_area",
        description="Calculate the area of a rectangle",
        parameters={
            "type": "object",
            "properties": {
                "length": {"type": "number", "description": "Length of rectangle"},
                "width": {"type": "number", "description": "Width of rectangle"},
            },
            "required": ["length", "width"],
        },
        callable=calculate_area,
        is_async=False,
    )
    assert area_tool.run({"length": 5, "width": 10}) == 50
    assert cast(Any, area_tool.get_schema())["function"]["name"] == "calculate_area"


def test_a_tool_made_with_a_namespace_is_qualified_by_it() -> None:
    math_tool = Tool(
        name="math_ops-multiply",
        description="Multiply two numbers",
        parameters={
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
        callable=lambda a, b: a * b,
        is_async=False,
        namespace="math_ops",
        method_name="multiply",
    )
    assert math_tool.qualified_name == "math_ops-multiply"
    assert math_tool.namespace == "math_ops"
    assert math_tool.method_name == "multiply"


def test_from_function_takes_the_namespace_and_method_name() -> None:
    def multiply(a: float, b: float) -> float:
        """Multiply two numbers."""
        return a * b

    tool = Tool.from_function(multiply, namespace="math_ops")
    assert (tool.name, tool.namespace, tool.method_name, tool.qualified_name) == (
        "math_ops-multiply", "math_ops", "multiply", "math_ops-multiply"
    )
    tool2 = Tool.from_function(multiply, namespace="math_ops", method_name="mul")
    assert tool2.name == "math_ops-mul"
    assert tool2.method_name == "mul"


def test_update_namespace_puts_a_tool_into_a_namespace() -> None:
    math_tool = Tool.from_function(lambda a, b: a * b, name="multiply")
    math_tool.update_namespace("math_operations")
    assert math_tool.name == "math_operations-multiply"
    assert math_tool.namespace == "math_operations"
    assert math_tool.method_name == "multiply"
    assert math_tool.qualified_name == "math_operations-multiply"


def test_update_namespace_keeps_or_replaces_a_namespace_as_its_docstring_says() -> None:
    tool = Tool(name="example_tool")
    tool.update_namespace("new_namespace")
    assert tool.name == "new_namespace-example_tool"

    tool = Tool(name="old_namespace.example_tool")
    tool.update_namespace("new_namespace", force=False)
    assert tool.name == "old_namespace-example_tool"

    tool = Tool(name="old_namespace.example_tool")
    tool.update_namespace("new_namespace", force=True, sep=".")
    assert tool.name == "new_namespace.example_tool"


def test_an_async_function_makes_an_async_tool() -> None:
    async def fetch_data(url: str) -> dict[str, Any]:
        """Fetch data from a URL asynchronously."""
        return {"url": url, "data": "sample"}

    async_tool = Tool(
        name="fetch_data",
        description="Fetch data from URL",
        parameters={
            "type": "object",
            "properties": {"url": {"type": "string", "description": "URL to fetch from"}},
            "required": ["url"],
        },
        callable=fetch_data,
        is_async=True,
    )
    assert async_tool.is_async
    assert asyncio.run(async_tool.arun({"url": "u"})) == {"url": "u", "data": "sample"}


def test_run_raw_raises_and_run_returns_the_error_string() -> None:
    def divide(a: float, b: float) -> float:
        """Divide a by b."""
        return a / b

    tool = Tool.from_function(divide)
    with pytest.raises(ZeroDivisionError):
        tool.run_raw({"a": 10, "b": 0})
    with pytest.warns(DeprecationWarning, match="run_raw"):
        result = tool.run({"a": 10, "b": 0})
    # Python 3.11 says "float division by zero"; 3.12+ says "division by zero" as documented.
    assert str(result).startswith("Error executing divide: ")
    assert str(result).endswith("division by zero")


class _EmailService:
    def __init__(self) -> None:
        self.sent: list[dict[str, str]] = []

    async def send(self, *, to: str, subject: str, body: str) -> None:
        self.sent.append({"to": to, "subject": subject, "body": body})


email_service = _EmailService()


class SendEmailTool(BaseTool):
    risk = ToolRisk.CRITICAL  # Strategy: class-level
    hitl_mode = HitlMode.BLOCKING  # Agent suspends until user approves

    def __init__(self) -> None:
        super().__init__(
            name="send_email",
            description="Send an email to a recipient",
            input_schema={
                "type": "object",
                "properties": {
                    "to": {"type": "string", "description": "Recipient email"},
                    "subject": {"type": "string"},
                    "body": {"type": "string"},
                },
                "required": ["to", "subject", "body"],
            },
        )

    async def execute(self, *, to: str, subject: str, body: str) -> ToolResult:  # type: ignore[override]
        await email_service.send(to=to, subject=subject, body=body)
        return ToolResult(
            content=[{"type": "text", "text": f"Email sent to {to}"}],
            app_data={"recipients": [to]},  # ← use app_data, not metadata
        )


def test_a_base_tool_subclass_takes_its_class_level_risk_and_hitl_mode() -> None:
    t = SendEmailTool()
    assert (t.name, t.risk, t.hitl_mode) == ("send_email", ToolRisk.CRITICAL, HitlMode.BLOCKING)
    assert cast(Any, t.get_openai_schema())["function"]["parameters"]["required"] == ["to", "subject", "body"]
    mcp_schema: Any = t.get_mcp_schema()
    assert mcp_schema["inputSchema"]["properties"]["to"]["description"] == "Recipient email"


EMAIL = {"to": "a@b.c", "subject": "hi", "body": "yo"}


@pytest.mark.parametrize("method", ["run", "run_raw"])
def test_send_email_run_directly_refuses_and_sends_nothing(method: str) -> None:
    sent = len(email_service.sent)
    with pytest.raises(UsageError, match=r"needs approval.*ToolInvoker") as refused:
        getattr(SendEmailTool(), method)(dict(EMAIL))
    assert "send_email" in str(refused.value) and "\n" not in str(refused.value)
    assert len(email_service.sent) == sent


@pytest.mark.parametrize("method", ["arun", "arun_raw"])
def test_send_email_arun_directly_refuses_and_sends_nothing(method: str) -> None:
    sent = len(email_service.sent)
    with pytest.raises(UsageError, match="ToolInvoker"):
        asyncio.run(getattr(SendEmailTool(), method)(dict(EMAIL)))
    assert len(email_service.sent) == sent


@pytest.mark.parametrize("bad", [{"to": "a@b.c", "subject": "hi"}, {**EMAIL, "to": 7}])
def test_invalid_input_raises_value_error_before_anything_else(
        bad: dict[str, object]) -> None:
    # ① validate input schema -> invalid -> ValueError (the direct run's lifecycle), from run() too
    with pytest.raises(ValueError, match="to"):
        SendEmailTool().run(bad)


def test_send_email_runs_once_a_person_approves_through_the_invoker() -> None:
    sent = len(email_service.sent)
    call = ToolCall(id="c1", name="send_email", arguments=dict(EMAIL))
    nobody = ToolInvoker([SendEmailTool()]).invoke_sync(call)  # no handler that can say yes
    assert nobody.status == "denied" and len(email_service.sent) == sent
    refused = ToolInvoker([SendEmailTool()], approval_handler=AutoApprovalHandler(approve=False))
    assert refused.invoke_sync(call).status == "denied" and len(email_service.sent) == sent
    approver = ToolInvoker([SendEmailTool()], approval_handler=AutoApprovalHandler())
    result = approver.invoke_sync(call)
    assert result.status == "ok" and result.text == "Email sent to a@b.c"
    assert email_service.sent[sent:] == [EMAIL]


def test_a_safe_base_tool_still_runs_directly() -> None:
    class WordCountTool(BaseTool):
        risk = ToolRisk.SAFE

        async def execute(self, *, text: str) -> int:  # type: ignore[override]
            """Count the words of a text."""
            return len(text.split())

    counter = WordCountTool()
    assert counter.run({"text": "one two three"}) == 3
    assert asyncio.run(counter.arun_raw({"text": "a b"})) == 2
    asks = WordCountTool(hitl_mode=HitlMode.BLOCKING)  # a HITL mode of its own asks
    with pytest.raises(UsageError, match="ToolInvoker"):
        asks.run({"text": "x"})
