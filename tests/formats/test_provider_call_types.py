"""``ProviderDefinedTool.call_types``: a Responses payload's ``computer_call``,
``apply_patch_call`` and ``shell_call`` items (built with the OpenAI SDK's own types) become calls
of the tool that declared their type, go through the invoker to ``handle_call``, and their results
come back as the matching output items, which the SDK's request types accept."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from openai.types.responses import (
    Response,
    ResponseApplyPatchToolCall,
    ResponseComputerToolCall,
    ResponseFunctionShellToolCall,
    ResponseFunctionToolCall,
    ResponseInputParam,
    ToolParam,
)
from openai.types.responses.response_computer_tool_call import ActionClick
from pydantic import TypeAdapter

from toolkeeper import (
    AutoApprovalHandler,
    ImageBlock,
    ProviderDefinedTool,
    Toolbox,
    ToolCall,
    ToolContext,
    ToolInvoker,
    ToolResult,
    ToolRisk,
    export,
    tool,
)
from toolkeeper.core.spec import ToolLike

pytestmark = pytest.mark.anyio

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n-screen-").decode()


class ComputerTool(ProviderDefinedTool):
    call_types = ("computer_call",)

    def __init__(self) -> None:
        super().__init__(name="computer", provider_specs={"openai-responses": {
            "type": "computer_use_preview", "display_width": 1024, "display_height": 768,
            "environment": "browser"}})
        self.handled: list[ToolCall] = []

    async def handle_call(self, call: ToolCall, ctx: ToolContext | None) -> ToolResult:
        self.handled.append(call)
        return ToolResult(content=[ImageBlock(data=PNG, media_type="image/png")])


class ApplyPatchTool(ProviderDefinedTool):
    call_types = ("apply_patch_call",)

    def __init__(self, risk: ToolRisk = ToolRisk.SAFE) -> None:
        super().__init__(name="apply_patch", risk=risk,
                         provider_specs={"openai-responses": {"type": "apply_patch"}})
        self.handled: list[ToolCall] = []

    async def handle_call(self, call: ToolCall, ctx: ToolContext | None) -> ToolResult:
        self.handled.append(call)
        operation: Any = call.arguments["operation"]
        return ToolResult.text_result(f"created {operation['path']}")


class ShellTool(ProviderDefinedTool):
    call_types = ("shell_call",)

    def __init__(self) -> None:
        super().__init__(name="shell", provider_specs={"openai-responses": {"type": "shell"}})

    async def handle_call(self, call: ToolCall, ctx: ToolContext | None) -> ToolResult:
        action: Any = call.arguments["action"]
        return ToolResult.error(f"not allowed here: {action['commands'][0]}")


@tool
def get_forecast(city: str) -> str:
    """Get the weather forecast for a city."""
    return f"sunny in {city}"


def response(*items: object) -> Response:
    return Response(id="r1", object="response", created_at=1, model="computer-use-preview",
                    parallel_tool_calls=True, tool_choice="auto", tools=[], output=list(items))


def computer_call() -> ResponseComputerToolCall:
    return ResponseComputerToolCall(
        id="cu1", call_id="call_cu1", type="computer_call", status="completed",
        action=ActionClick(type="click", button="left", x=10, y=20), pending_safety_checks=[])


def patch_call() -> ResponseApplyPatchToolCall:
    return ResponseApplyPatchToolCall.model_validate({
        "id": "ap1", "call_id": "call_ap1", "type": "apply_patch_call", "status": "completed",
        "operation": {"type": "create_file", "path": "hello.txt", "diff": "+hello\n"}})


def shell_call() -> ResponseFunctionShellToolCall:
    return ResponseFunctionShellToolCall.model_validate({
        "id": "sh1", "call_id": "call_sh1", "type": "shell_call", "status": "completed",
        "action": {"commands": ["rm -rf /"]}})


def function_call() -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(id="fc1", call_id="call_fc1", type="function_call",
                                    name="get_forecast", arguments='{"city": "Lisbon"}')


async def test_each_declared_call_type_reaches_handle_call_and_returns_its_output_item() -> None:
    computer, patcher, shell = ComputerTool(), ApplyPatchTool(), ShellTool()
    tools: list[ToolLike] = [computer, patcher, shell, get_forecast]
    exported = export(tools, "openai-responses")
    TypeAdapter(list[ToolParam]).validate_python(exported.tools)  # the SDK accepts the tools
    reply = response(computer_call(), patch_call(), function_call(), shell_call())

    calls = exported.parse(reply)
    assert [(c.name, c.call_type, c.id) for c in calls] == [
        ("computer", "computer_call", "call_cu1"), ("apply_patch", "apply_patch_call", "call_ap1"),
        ("get_forecast", None, "call_fc1"), ("shell", "shell_call", "call_sh1")]

    invoker = ToolInvoker(tools)
    async with invoker.open_session() as session:
        results = await invoker.invoke_many(calls, session=session)
    assert [r.status for r in results] == ["ok", "ok", "ok", "error"]
    assert computer.handled[0].arguments["action"] == {
        "type": "click", "button": "left", "x": 10, "y": 20}
    assert patcher.handled[0].call_type == "apply_patch_call"

    conversation: list[Any] = [{"role": "user", "content": "Say hello in a file."}]
    exported.append_turn(conversation, reply, calls, results)
    TypeAdapter(ResponseInputParam).validate_python(conversation)  # a valid next request
    outputs = {item["type"]: item for item in conversation[5:]}
    assert list(outputs) == ["computer_call_output", "apply_patch_call_output",
                             "function_call_output", "shell_call_output"]
    assert outputs["computer_call_output"] == {
        "type": "computer_call_output", "call_id": "call_cu1",
        "output": {"type": "computer_screenshot", "image_url": f"data:image/png;base64,{PNG}"}}
    assert outputs["apply_patch_call_output"] == {
        "type": "apply_patch_call_output", "call_id": "call_ap1", "status": "completed",
        "output": "created hello.txt"}
    assert outputs["function_call_output"]["output"] == "sunny in Lisbon"
    shell_out = outputs["shell_call_output"]["output"]
    assert shell_out[0]["outcome"] == {"type": "exit", "exit_code": 1}
    assert "not allowed here: rm -rf /" in shell_out[0]["stderr"]


async def test_a_risky_provider_call_is_asked_about_and_refused_without_a_yes() -> None:
    patcher = ApplyPatchTool(risk=ToolRisk.CRITICAL)
    exported = export([patcher], "openai-responses")
    reply = response(patch_call())
    (call,) = exported.parse(reply)
    asked: list[str] = []

    def says_no(request: Any) -> bool:  # records, then says no
        asked.append(request.tool)
        return False

    invoker = ToolInvoker([patcher], approval_handler=AutoApprovalHandler(rule=says_no))
    async with invoker.open_session() as session:
        (result,) = await invoker.invoke_many([call], session=session)
    assert (result.status, asked, patcher.handled) == ("denied", ["apply_patch"], [])
    (output,) = exported.render([(call, result.to_tool_result())])
    assert output["type"] == "apply_patch_call_output" and output["status"] == "failed"
    assert "not approved" in json.dumps(output)


def test_an_item_no_tool_declared_is_not_a_call() -> None:
    exported = export([get_forecast], "openai-responses")
    assert exported.parse(response(computer_call(), function_call())) == [
        exported.parse(response(function_call()))[0]]


def test_two_tools_claiming_one_call_type_give_a_malformed_call() -> None:
    class OtherPatcher(ApplyPatchTool):
        def __init__(self) -> None:
            ProviderDefinedTool.__init__(self, name="other_patch", provider_specs={
                "openai-responses": {"type": "apply_patch"}})

    exported = export([ApplyPatchTool(), OtherPatcher()], "openai-responses")
    (call,) = exported.parse(response(patch_call()))
    assert call.problem is not None and "apply_patch, other_patch" in call.problem.message


def test_the_catalogs_execute_tool_calls_answers_a_computer_call_too() -> None:
    computer = ComputerTool()
    box = Toolbox([computer, get_forecast])
    items = box.execute_tool_calls(response(computer_call()), "openai-responses")
    assert items == [{"type": "computer_call_output", "call_id": "call_cu1", "output": {
        "type": "computer_screenshot", "image_url": f"data:image/png;base64,{PNG}"}}]
    assert computer.handled[0].arguments["type"] == "computer_call"
