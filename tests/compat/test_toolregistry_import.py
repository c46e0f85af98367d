"""A program written for toolregistry, with one import changed, runs as toolregistry documents —
and through toolkeeper's door: its calls are validated, timed out and refused by toolkeeper's
invoker, its declarations are toolkeeper's exports."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, cast

import pytest
from anthropic.types import MessageParam, ToolUseBlock
from google.genai import types as genai
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionMessageToolCall
from openai.types.responses import ResponseFunctionToolCall, ResponseInputParam
from pydantic import TypeAdapter

import toolkeeper
from toolkeeper import ToolInvoker, UsageError
from toolkeeper.compat.toolregistry import (
    ErrorResult,
    ResultList,
    Tool,
    ToolCallResult,
    ToolMetadata,
    ToolRegistry,
)

REASON = "toolcall_reason"


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def registry_with(*funcs: Any, **options: Any) -> ToolRegistry:
    registry = ToolRegistry(name="r", **options)
    for func in funcs:
        registry.register(func)
    return registry


def test_a_list_of_call_dicts_runs_without_naming_its_format() -> None:
    registry = registry_with(add)
    calls = [
        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}},
        {"type": "function_call", "call_id": "c2", "name": "add", "arguments": '{"a": 3, "b": 4}'},
        {"type": "tool_use", "id": "c3", "name": "add", "input": {"a": 5, "b": 6}},
        {"functionCall": {"id": "c4", "name": "add", "args": {"a": 7, "b": 8}}},
        {"type": "function_call", "id": "c5", "name": "add", "arguments": {"a": 9, "b": 1}},
    ]
    results = registry.execute_tool_calls(calls)
    assert isinstance(results, ResultList)
    assert [(r.id, r.result) for r in results] == [  # type: ignore[union-attr]
        ("c1", "3"), ("c2", "7"), ("c3", "11"), ("c4", "15"), ("c5", "10")]
    assert results["c3"].result == "11" and "c5" in results  # type: ignore[union-attr, comparison-overlap]


def test_the_provider_sdks_own_call_objects_are_read_as_they_come() -> None:
    registry = registry_with(add)
    sdk_calls = [
        ChatCompletionMessageToolCall.model_validate(
            {"id": "o1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 1}'}}),
        ResponseFunctionToolCall.model_validate(
            {"type": "function_call", "call_id": "r1", "name": "add", "arguments": '{"a": 2, "b": 2}'}),
        ToolUseBlock.model_validate({"type": "tool_use", "id": "a1", "name": "add",
                                     "input": {"a": 3, "b": 3}}),
        genai.Part(function_call=genai.FunctionCall(id="g1", name="add", args={"a": 4, "b": 4})),
    ]
    results = registry.execute_tool_calls(sdk_calls)
    assert [str(r) for r in results] == ["2", "4", "6", "8"]


def test_gemini_calls_without_an_id_are_numbered_by_their_place_in_the_batch() -> None:
    registry = registry_with(add)
    results = registry.execute_tool_calls([
        {"functionCall": {"name": "add", "args": {"a": 1, "b": 1}}},
        {"functionCall": {"id": "call_kept", "name": "add", "args": {"a": 1, "b": 2}}},
        {"functionCall": {"name": "add", "args": {"a": 1, "b": 3}}}])
    assert [(r.id, str(r)) for r in results] == [("call_0", "2"), ("call_kept", "3"),
                                                 ("call_2", "4")]


def test_a_call_in_no_known_shape_is_toolregistrys_type_error() -> None:
    with pytest.raises(TypeError, match="Unsupported tool call format"):
        registry_with(add).execute_tool_calls([{"tool": "add"}])


def test_the_defaults_are_toolregistrys_here_and_toolkeepers_own_stay_as_they_were() -> None:
    compat = registry_with(add)
    declared: Any = compat.get_schemas()[0]
    assert REASON not in declared["function"]["parameters"]["properties"]
    plain: Any = Tool.from_function(add).get_schema()
    assert REASON not in plain["function"]["parameters"]["properties"]
    own = toolkeeper.ToolRegistry([toolkeeper.Tool.from_function(add)])
    assert REASON in cast(Any, own.get_schemas()[0])["function"]["parameters"]["properties"]
    assert REASON not in cast(Any, toolkeeper.Tool.from_function(add).get_schema())[
        "function"]["parameters"]["properties"]
    with pytest.raises(TypeError):
        toolkeeper.ToolRegistry(name="r")  # type: ignore[call-arg]
    assert ToolRegistry(name="r").name == "r"


def test_arguments_are_validated_by_toolkeeper_before_the_function_runs() -> None:
    ran: list[object] = []

    def record(a: int) -> int:
        """Record a."""
        ran.append(a)
        return a

    registry = registry_with(record)
    (bad,) = registry.execute_tool_calls([{"id": "c", "type": "function", "function": {
        "name": "record", "arguments": '{"a": "not a number"}'}}])
    assert isinstance(bad, ErrorResult)
    assert bad.message.startswith("ValueError: invalid arguments for tool 'record': argument 'a'")
    (coerced,) = registry.execute_tool_calls([{"id": "d", "type": "function", "function": {
        "name": "record", "arguments": '{"a": "5", "unknown": 1}'}}])
    assert isinstance(coerced, ToolCallResult) and coerced.result == "5" and ran == [5]


def test_a_tool_that_outlives_its_timeout_is_cut_off_by_the_invoker() -> None:
    release = threading.Event()

    def stuck() -> str:
        """Wait for release."""
        release.wait(30)
        return "late"

    registry = ToolRegistry(name="r")
    registry.register(Tool.from_function(stuck, metadata=ToolMetadata(timeout=0.05)))
    try:
        result = registry.invoke("stuck", {}, invocation_id="call_1")
    finally:
        release.set()
    assert isinstance(result, ErrorResult)
    assert result.message == "TimeoutError: Error: Tool 'stuck' timed out"


def test_failures_and_refusals_read_as_toolregistrys_errors() -> None:
    def fail() -> str:
        """Fail."""
        raise ValueError("something went wrong")

    registry = registry_with(fail, add)
    registry.disable("add", reason="maintenance")
    failed, disabled, missing = registry.execute_tool_calls([
        {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": "{}"}}
        for i, name in enumerate(["fail", "add", "nope"])])
    assert str(failed) == "ValueError: Error executing fail: something went wrong"
    assert str(disabled) == "RuntimeError: Error: Tool 'add' is disabled: maintenance"
    assert str(missing) == "KeyError: Error: \"Tool 'nope' is not registered\""


def _calls(name: str) -> list[dict[str, Any]]:
    return [{"id": n, "type": "function", "function": {"name": name,
                                                       "arguments": f'{{"n": "{n}"}}'}}
            for n in ("x", "y")]


def test_a_batch_with_a_tool_that_is_not_concurrency_safe_runs_one_call_after_the_other() -> None:
    log: list[str] = []

    async def step(n: str) -> str:
        """Log a start and an end around a yield to the loop."""
        log.append(f"start {n}")
        await asyncio.sleep(0)
        log.append(f"end {n}")
        return n

    registry = ToolRegistry(name="r")
    registry.register(Tool.from_function(step, metadata=ToolMetadata(is_concurrency_safe=False)))
    registry.execute_tool_calls(_calls("step"))
    assert log == ["start x", "end x", "start y", "end y"]


def test_a_batch_of_concurrency_safe_calls_runs_at_once() -> None:
    arrived: dict[str, asyncio.Event] = {}

    async def meet(n: str) -> str:
        """Wait until the other call of the batch has started too."""
        for key in ("x", "y"):
            arrived.setdefault(key, asyncio.Event())
        arrived[n].set()
        other = arrived["y" if n == "x" else "x"]
        await asyncio.wait_for(other.wait(), timeout=30)  # bounded: reached only if concurrent
        return "met"

    results = registry_with(meet).execute_tool_calls(_calls("meet"))
    assert [str(r) for r in results] == ["met", "met"]


def test_messages_of_a_round_trip_validate_with_each_providers_sdk() -> None:
    registry = registry_with(add)
    calls = [{"id": "call_1", "type": "function",
              "function": {"name": "add", "arguments": '{"a": 5, "b": 3}'}}]
    results = registry.execute_tool_calls(calls)
    chat = registry.build_tool_call_messages(calls, results)
    TypeAdapter(list[ChatCompletionMessageParam]).validate_python(chat)
    assert chat[1] == {"role": "tool", "tool_call_id": "call_1", "content": "8"}
    TypeAdapter(ResponseInputParam).validate_python(
        registry.build_tool_call_messages(calls, results, api_format="openai-responses"))
    TypeAdapter(list[MessageParam]).validate_python(
        registry.build_tool_call_messages(calls, results, api_format="anthropic"))
    for content in registry.build_tool_call_messages(calls, results, api_format="gemini"):
        genai.Content.model_validate(content)


def test_a_non_ascii_argument_reaches_gemini_in_ascii_and_the_function_under_its_name() -> None:
    def quote(año_vehiculo: int) -> str:
        """Quote car insurance."""
        return f"quote for {año_vehiculo}"

    registry = registry_with(quote)
    declaration: Any
    (declaration,) = registry.get_schemas(api_format="gemini")
    assert list(declaration["parameters"]["properties"]) == ["ano_vehiculo"]
    (result,) = registry.execute_tool_calls(
        [{"functionCall": {"id": "g", "name": "quote", "args": {"ano_vehiculo": 2019}}}])
    assert str(result) == "quote for 2019"


def test_the_registry_is_a_toolkeeper_catalog_too() -> None:
    registry = registry_with(add, think_augment=True)
    box = registry.toolbox
    assert REASON in cast(Any, box.schemas("anthropic")[0])["input_schema"]["properties"]
    result = ToolInvoker(box).invoke_sync(toolkeeper.ToolCall(id="1", name="add",
                                                              arguments={"a": 2, "b": 2}))
    assert result.text == "4"


def test_what_this_import_does_not_offer_says_what_to_use_instead() -> None:
    with pytest.raises(UsageError, match="MCPGateway"):
        ToolRegistry().register("http://localhost:8000/mcp", source="mcp")
    with pytest.raises(UsageError, match="with_tool_search"):
        ToolRegistry(tool_discovery=True)
    with pytest.raises(UsageError, match="register the function it wraps"):
        ToolRegistry().register(toolkeeper.Tool.from_function(add))

    def uses_ctx(ctx: str) -> str:
        return ctx

    with pytest.raises(UsageError, match="parameter named 'ctx'"):
        Tool.from_function(uses_ctx)
