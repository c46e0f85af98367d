"""The agent loop a user writes, for each provider: call the model, append its turn and the
results through ``append_turn``, repeat until it stops calling tools. The model is a fake built
from the SDKs' own response types; the conversation it is sent is checked against the SDKs'
own request types."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from anthropic.types import Message, MessageParam
from google.genai import types as genai
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam
from openai.types.responses import Response, ResponseInputParam
from pydantic import TypeAdapter

from toolkeeper import ToolInvoker, UsageError, export, tool

from .test_parse_and_render import CASES

pytestmark = pytest.mark.anyio


@tool
def get_forecast(city: str, days: int = 1) -> dict:  # type: ignore[type-arg]
    """Get the weather forecast for a city.

    Args:
        city: City name.
        days: How many days ahead.
    """
    return {"city": city, "days": days, "summary": "sunny"}


def final_answer(api_format: str) -> Any:
    """A response with no tool call: the loop ends."""
    if api_format == "openai-chat":
        return ChatCompletion.model_validate({
            "id": "c2", "object": "chat.completion", "created": 1, "model": "gpt-4o",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "Sunny."}}]})
    if api_format == "openai-responses":
        return Response.model_validate({
            "id": "r2", "object": "response", "created_at": 1, "model": "gpt-4.1",
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "output": [{"type": "message", "id": "m1", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": "Sunny.", "annotations": []}]}]})
    if api_format == "anthropic":
        return Message.model_validate({
            "id": "m2", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "Sunny."}], "stop_reason": "end_turn",
            "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}})
    return genai.GenerateContentResponse.model_validate(
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "Sunny."}]}}]})


VALID: dict[str, Callable[[list[Any]], object]] = {
    "openai-chat": TypeAdapter(list[ChatCompletionMessageParam]).validate_python,
    "openai-responses": TypeAdapter(ResponseInputParam).validate_python,
    "anthropic": TypeAdapter(list[MessageParam]).validate_python,
    "gemini": lambda items: [genai.Content.model_validate(i) for i in items],
}


@pytest.mark.parametrize("api_format", list(CASES))
async def test_the_agent_loop_appends_turns_and_results_in_each_providers_shape(
        api_format: str) -> None:
    replies = [CASES[api_format]([("c1", "get_forecast", {"city": "Lisbon"}),
                                  ("c2", "get_forecast", {"days": 2})]),
               final_answer(api_format)]
    sent: list[list[Any]] = []

    def model(conversation: list[Any]) -> Any:  # the provider's client, faked
        sent.append(json.loads(json.dumps(conversation)))
        return replies[len(sent) - 1]

    exported = export([get_forecast], api_format)
    invoker = ToolInvoker([get_forecast])
    user = ({"role": "user", "parts": [{"text": "Weather?"}]} if api_format == "gemini"
            else {"role": "user", "content": "Weather?"})
    conversation: list[Any] = [user]
    async with invoker.open_session() as session:
        while True:
            response = model(conversation)
            calls = exported.parse(response)
            if not calls:
                break
            results = await invoker.invoke_many(calls, session=session)
            exported.append_turn(conversation, response, calls, results)
    assert len(sent) == 2
    second = sent[1]
    VALID[api_format](second)  # the SDK accepts the conversation as a request
    text = json.dumps(second)
    assert '\\"summary\\":\\"sunny\\"' in text or '"summary": "sunny"' in text
    assert "missing required argument 'city'" in text  # the bad call's error reached the model
    assert session.call_count == 2


def test_append_turn_wants_one_result_per_call() -> None:
    exported = export([get_forecast], "anthropic")
    response = CASES["anthropic"]([("c1", "get_forecast", {"city": "Lisbon"})])
    with pytest.raises(UsageError, match="2 calls but 1 results"):
        exported.append_turn([], response, exported.parse(response) * 2, [object()])  # type: ignore[list-item]


def test_render_takes_the_invokers_results_as_append_turn_does() -> None:
    exported = export([get_forecast], "anthropic")
    response = CASES["anthropic"]([("c1", "get_forecast", {"city": "Lisbon"})])
    calls = exported.parse(response)
    results = [ToolInvoker([get_forecast]).invoke_sync(call) for call in calls]
    message: Any
    (message,) = exported.render(zip(calls, results, strict=True))
    assert message == exported.render([(calls[0], results[0].to_tool_result())])[0]
    assert message["content"][0]["tool_use_id"] == "c1"
