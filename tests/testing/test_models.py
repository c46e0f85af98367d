"""The agent loop of docs/agent-loop.md, run for each provider against toolkeeper.testing's
scripted models: each answers with its SDK's own response type, the loop parses the calls,
runs them through the invoker and appends the results, and the conversation it sends back is
accepted by the SDK's own request types."""

from __future__ import annotations

from typing import Any

import pytest
from anthropic.types import Message, MessageParam
from google.genai import types as genai
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam
from openai.types.responses import Response, ResponseInputParam
from pydantic import TypeAdapter

from toolkeeper import ToolInvoker, UsageError, export, tool
from toolkeeper.testing import (
    ScriptedAnthropic,
    ScriptedGemini,
    ScriptedOpenAIChat,
    ScriptedOpenAIResponses,
    call,
    say,
)

pytestmark = pytest.mark.anyio
FORECASTS: list[str] = []


@tool
def get_forecast(city: str, days: int = 1) -> str:
    """Get the weather forecast for a city."""
    FORECASTS.append(city)
    return f"{city}: sunny for {days} day(s)"


TURNS = (call("get_forecast", city="Lisbon") + call("get_forecast", {"days": 2}),
         say("Sunny in Lisbon."))
USER: dict[str, Any] = {"role": "user", "content": "Weather in Lisbon?"}


async def loop(api_format: str, model: Any, send: Any, conversation: list[Any]) -> Any:
    exported = export([get_forecast], api_format)
    invoker = ToolInvoker([get_forecast])
    async with invoker.open_session() as session:
        while True:
            response = send(model, conversation, exported.tools)
            calls = exported.parse(response)
            if not calls:
                return response
            results = await invoker.invoke_many(calls, session=session)
            exported.append_turn(conversation, response, calls, results)


async def test_openai_chat() -> None:
    FORECASTS.clear()
    client = ScriptedOpenAIChat(*TURNS)
    final = await loop("openai-chat", client, lambda c, m, t: c.chat.completions.create(
        model="gpt-4.1", messages=m, tools=t), [USER])
    assert isinstance(final, ChatCompletion) and final.choices[0].message.content == \
        "Sunny in Lisbon."
    sent: Any = client.requests[1]["messages"]
    TypeAdapter(list[ChatCompletionMessageParam]).validate_python(sent)
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool"]
    assert "sunny for 1 day" in sent[2]["content"]
    assert "missing required argument 'city'" in sent[3]["content"]
    assert FORECASTS == ["Lisbon"]


async def test_openai_responses() -> None:
    client = ScriptedOpenAIResponses(*TURNS)
    final = await loop("openai-responses", client, lambda c, m, t: c.responses.create(
        model="gpt-4.1", input=m, tools=t), [USER])
    assert isinstance(final, Response) and final.output_text == "Sunny in Lisbon."
    sent: Any = client.requests[1]["input"]
    TypeAdapter(ResponseInputParam).validate_python(sent)
    outputs = [i["output"] for i in sent if isinstance(i, dict) and
               i.get("type") == "function_call_output"]
    assert len(outputs) == 2 and "sunny for 1 day" in str(outputs[0])


async def test_anthropic() -> None:
    client = ScriptedAnthropic(*TURNS)
    final = await loop("anthropic", client, lambda c, m, t: c.messages.create(
        model="claude-sonnet-4-5", max_tokens=1024, messages=m, tools=t), [USER])
    assert isinstance(final, Message) and final.content[0].text == "Sunny in Lisbon."  # type: ignore[union-attr]
    sent: Any = client.requests[1]["messages"]
    TypeAdapter(list[MessageParam]).validate_python(sent)
    results = sent[-1]["content"]
    assert [r["type"] for r in results] == ["tool_result", "tool_result"]
    assert results[1]["is_error"] is True


async def test_gemini() -> None:
    client = ScriptedGemini(*TURNS)
    user = {"role": "user", "parts": [{"text": "Weather in Lisbon?"}]}
    final = await loop("gemini", client, lambda c, m, t: c.models.generate_content(
        model="gemini-2.5-flash", contents=m, config={"tools": t}), [user])
    assert isinstance(final, genai.GenerateContentResponse) and final.text == "Sunny in Lisbon."
    sent: Any = client.requests[1]["contents"]
    contents = [genai.Content.model_validate(c) for c in sent]
    responses = [p.function_response for p in contents[-1].parts or [] if p.function_response]
    assert len(responses) == 2 and "sunny for 1 day" in str(responses[0].response)


def test_a_loop_past_the_script_is_told_how_many_turns_were_scripted() -> None:
    client = ScriptedOpenAIChat(say("hi"))
    client.chat.completions.create(model="m", messages=[])
    with pytest.raises(UsageError, match="asked for turn 2 but 1 were scripted"):
        client.chat.completions.create(model="m", messages=[])


def test_a_turn_that_is_not_one_says_what_a_turn_is() -> None:
    with pytest.raises(UsageError, match=r"must be say\('...'\) or call\('tool', ...\), got int"):
        ScriptedAnthropic(3)  # type: ignore[arg-type]
