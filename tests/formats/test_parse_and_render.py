"""Calls come back from SDK response objects; results go out in each provider's message shape."""

from __future__ import annotations

import json
from typing import Any

import mcp.types as mcp_types
import pytest
from anthropic.types import Message, MessageParam
from google.genai import types as genai
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionToolMessageParam,
    ChatCompletionUserMessageParam,
)
from openai.types.responses import Response
from openai.types.responses.response_input_param import FunctionCallOutput
from pydantic import TypeAdapter

from toolkeeper import (
    ImageBlock,
    ToolCall,
    ToolResult,
    WireFormatError,
    export,
    parse_tool_calls,
    render_result,
    render_results,
)

from .tools_zoo import RAW, zoo

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8


def chat_completion(calls: list[tuple[str, str, str]]) -> ChatCompletion:
    return ChatCompletion.model_validate({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None,
            "tool_calls": [{"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                           for i, n, a in calls]}}],
    })


def responses_response(calls: list[tuple[str, str, str]]) -> Response:
    return Response.model_validate({
        "id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-4.1",
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "output": [{"type": "reasoning", "id": "rs_1", "summary": []}] + [
            {"type": "function_call", "id": f"fc_{i}", "call_id": i, "name": n, "arguments": a,
             "status": "completed"} for i, n, a in calls],
    })


def anthropic_message(calls: list[tuple[str, str, Any]]) -> Message:
    return Message.model_validate({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Let me check."}] + [
            {"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls],
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    })


def gemini_response(calls: list[tuple[str, str, Any]]) -> genai.GenerateContentResponse:
    return genai.GenerateContentResponse.model_validate({
        "candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"id": i, "name": n, "args": a}} for i, n, a in calls]}}],
    })


def mcp_request(name: str, arguments: dict[str, Any]) -> Any:
    return mcp_types.CallToolRequest(params=mcp_types.CallToolRequestParams(name=name,
                                                                            arguments=arguments))


CASES = {
    "openai-chat": lambda c: chat_completion([(i, n, json.dumps(a)) for i, n, a in c]),
    "openai-responses": lambda c: responses_response([(i, n, json.dumps(a)) for i, n, a in c]),
    "anthropic": anthropic_message,
    "gemini": gemini_response,
}


@pytest.mark.parametrize("api_format", list(CASES))
def test_parallel_calls_are_parsed_from_sdk_objects_in_order(api_format: str) -> None:
    exported = export(zoo(), api_format)
    weird = exported.names.wire(RAW.name)
    response = CASES[api_format]([("c1", "simple", {"query": "a"}), ("c2", weird, {"q": "b"})])
    calls = exported.parse(response)
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("c1", "simple", {"query": "a"}), ("c2", RAW.name, {"q": "b"})
    ]
    assert calls[1].wire_name == weird and not calls[1].is_malformed


@pytest.mark.parametrize("api_format", list(CASES))
def test_parsing_accepts_plain_dicts_as_well(api_format: str) -> None:
    response = CASES[api_format]([("c1", "simple", {"query": "a"})]).model_dump(mode="json")
    calls = parse_tool_calls(response, api_format)
    assert [(c.name, c.arguments) for c in calls] == [("simple", {"query": "a"})]


def test_mcp_request_is_parsed() -> None:
    calls = parse_tool_calls(mcp_request("simple", {"query": "a"}), "mcp")
    assert [(c.name, c.arguments) for c in calls] == [("simple", {"query": "a"})]
    rpc = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
           "params": {"name": "simple", "arguments": {"query": "z"}}}
    assert parse_tool_calls(rpc, "mcp")[0].id == "7"


@pytest.mark.parametrize("api_format", ["openai-chat", "openai-responses"])
@pytest.mark.parametrize(
    ("raw", "fragment"),
    [('{"query": "a"', "not valid JSON"), ("[1, 2]", "got JSON list"), ("42", "got JSON int")],
)
def test_arguments_that_are_not_a_json_object_become_a_call_problem(
    api_format: str, raw: str, fragment: str
) -> None:
    builder = chat_completion if api_format == "openai-chat" else responses_response
    (call,) = parse_tool_calls(builder([("c1", "simple", raw)]), api_format)
    assert call.is_malformed and call.problem is not None
    assert call.problem.code == "malformed_call"
    assert fragment in call.problem.message
    assert call.raw_arguments == raw


def test_empty_argument_string_means_no_arguments() -> None:
    (call,) = parse_tool_calls(chat_completion([("c1", "no_args", "")]), "openai-chat")
    assert call.arguments == {} and not call.is_malformed


def test_unknown_tool_name_becomes_a_problem_naming_close_matches() -> None:
    exported = export(zoo(), "anthropic")
    (call,) = exported.parse(anthropic_message([("t1", "simpel", {"query": "a"})]))
    assert call.problem is not None and call.problem.code == "unknown_tool"
    assert "did you mean 'simple'" in call.problem.message


@pytest.mark.parametrize("api_format", ["openai-chat", "openai-responses", "anthropic", "gemini",
                                        "mcp"])
def test_payloads_of_the_wrong_shape_raise_a_wire_format_error(api_format: str) -> None:
    with pytest.raises(WireFormatError, match=api_format):
        parse_tool_calls({"unexpected": True}, api_format)
    with pytest.raises(WireFormatError):
        parse_tool_calls(42, api_format)


def test_responses_without_tool_calls_give_no_calls() -> None:
    assert parse_tool_calls(chat_completion([]), "openai-chat") == []
    assert parse_tool_calls(anthropic_message([]), "anthropic") == []


CALL = ToolCall(id="call_1", name="simple", wire_name="simple")
OK = ToolResult(content=[{"type": "text", "text": "3 hits"},
                         ImageBlock.from_bytes(PNG, "image/png")],
                structured_content={"hits": 3})
ERR = ToolResult.error("invalid arguments for tool 'simple': missing required argument 'query'",
                       code="invalid_arguments")


def test_openai_chat_results_render_as_tool_messages_plus_images() -> None:
    messages: Any = render_results([(CALL, OK), (CALL, ERR)], "openai-chat")
    tool_adapter = TypeAdapter(ChatCompletionToolMessageParam)
    tool_adapter.validate_python(messages[0])
    assert messages[0]["tool_call_id"] == "call_1"
    assert "3 hits" in messages[0]["content"]
    assert messages[1]["content"].startswith("invalid arguments")
    TypeAdapter(ChatCompletionUserMessageParam).validate_python(messages[2])
    assert messages[2]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")


def test_responses_results_render_as_function_call_output_items() -> None:
    item: Any = render_result(CALL, OK, "openai-responses")
    TypeAdapter(FunctionCallOutput).validate_python(item)
    assert item["output"][0] == {"type": "input_text", "text": "3 hits"}
    assert item["output"][1]["type"] == "input_image"
    plain = render_result(CALL, ERR, "openai-responses")
    assert isinstance(plain["output"], str)


def test_anthropic_results_render_as_tool_result_blocks_with_is_error() -> None:
    message: Any
    (message,) = render_results([(CALL, OK), (CALL, ERR)], "anthropic")
    TypeAdapter(MessageParam).validate_python(message)
    ok_block, err_block = message["content"]
    assert ok_block["content"][1]["source"]["media_type"] == "image/png"
    assert "is_error" not in ok_block
    assert err_block["is_error"] is True


def test_gemini_results_render_as_function_responses() -> None:
    (content,) = render_results([(CALL, OK), (CALL, ERR)], "gemini")
    parsed = genai.Content.model_validate(content)
    assert parsed.parts is not None
    first, second = (p.function_response for p in parsed.parts)
    assert first is not None and second is not None
    assert first.response == {"output": {"hits": 3}}
    assert second.response is not None and "error" in second.response


def test_mcp_results_render_as_call_tool_results() -> None:
    rendered = render_result(CALL, OK, "mcp")
    result = mcp_types.CallToolResult.model_validate(rendered)
    assert result.structured_content == {"hits": 3}
    assert [c.type for c in result.content] == ["text", "image"]
    error = mcp_types.CallToolResult.model_validate(render_result(CALL, ERR, "mcp"))
    assert error.is_error is True


def test_end_to_end_round_trip_through_anthropic() -> None:
    tools = zoo()
    exported = export(tools, "anthropic")
    by_name = {t.name: t for t in tools}
    response = anthropic_message([("t1", "simple", {"query": "x", "limit": "2"}),
                                  ("t2", "simple", {"limit": 1})])
    pairs = []
    for call in exported.parse(response):
        tool = by_name[call.name]
        try:
            result = tool.to_result(tool.run_raw(call.arguments))
        except Exception as exc:  # the invoker does this for real in a later layer
            result = ToolResult.error(str(exc), code=getattr(exc, "code", "tool_raised"))
        pairs.append((call, result))
    message: Any
    (message,) = exported.render(pairs)
    assert message["content"][0]["content"][0]["text"] == '["x","x"]'
    assert message["content"][1]["is_error"] is True
    assert "missing required argument 'query'" in message["content"][1]["content"][0]["text"]
