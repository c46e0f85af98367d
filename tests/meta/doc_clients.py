"""Provider clients for the documentation's examples, faked from the SDKs' own types: the first
request of a conversation gets a call of the first tool offered (its required arguments filled
in), the next ones the final answer "Sunny."; every request after the first is checked against
the SDK's own request types, so a conversation a doc builds wrongly fails there."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import anthropic
import openai
import pytest
from google import genai

from ..formats.test_agent_loop import VALID, final_answer
from ..formats.test_parse_and_render import CASES

SAMPLE = {"string": "Lisbon", "integer": 1, "number": 1.0, "boolean": True, "array": [],
          "object": {}}


def _first_tool(tools: object) -> tuple[str, dict[str, Any]]:
    """The wire name and parameter schema of the first function tool in a ``tools=`` value."""
    if isinstance(tools, dict):
        schema = next((tools[k] for k in ("parameters", "input_schema", "parametersJsonSchema")
                       if isinstance(tools.get(k), dict)), None)
        if isinstance(tools.get("name"), str) and schema is not None:
            return tools["name"], schema
        items: list[object] = list(tools.values())
    elif isinstance(tools, list | tuple):
        items = list(tools)
    else:
        raise AssertionError(f"no function tool offered in {tools!r}")
    for item in items:
        try:
            return _first_tool(item)
        except AssertionError:
            continue
    raise AssertionError(f"no function tool offered in {tools!r}")


def _arguments(schema: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties", {})
    return {name: SAMPLE.get(str(props.get(name, {}).get("type")), "x")
            for name in schema.get("required", [])}


class _Model:
    """One provider's model: a tool call first, then the answer."""

    def __init__(self, api_format: str) -> None:
        self.api_format = api_format
        self.requests = 0

    def reply(self, conversation: list[Any], tools: object) -> Any:
        self.requests += 1
        if self.requests > 1:
            VALID[self.api_format](conversation)  # the SDK accepts what the doc built
            return final_answer(self.api_format)
        name, schema = _first_tool(tools)
        return CASES[self.api_format]([("call_1", name, _arguments(schema))])


def _method(func: Callable[..., Any], is_async: bool) -> Callable[..., Any]:
    if not is_async:
        return func

    async def method(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)
    return method


class _Anthropic:
    is_async = False

    def __init__(self, **_: object) -> None:
        model = _Model("anthropic")
        self.messages = types.SimpleNamespace(create=_method(
            lambda **kw: model.reply(list(kw["messages"]), kw.get("tools")), self.is_async))


class _AsyncAnthropic(_Anthropic):
    is_async = True


class _OpenAI:
    is_async = False

    def __init__(self, **_: object) -> None:
        chat, responses = _Model("openai-chat"), _Model("openai-responses")
        create = _method(lambda **kw: chat.reply(list(kw["messages"]), kw.get("tools")),
                         self.is_async)
        self.chat = types.SimpleNamespace(completions=types.SimpleNamespace(create=create))
        self.responses = types.SimpleNamespace(create=_method(
            lambda **kw: responses.reply(list(kw["input"]), kw.get("tools")), self.is_async))


class _AsyncOpenAI(_OpenAI):
    is_async = True


class _GenAIClient:
    def __init__(self, **_: object) -> None:
        model = _Model("gemini")

        def generate(**kw: Any) -> Any:
            config = kw.get("config") or {}
            tools = config.get("tools") if isinstance(config, dict) else config.tools
            return model.reply(list(kw["contents"]), tools)
        self.models = types.SimpleNamespace(generate_content=generate)
        self.aio = types.SimpleNamespace(models=types.SimpleNamespace(
            generate_content=_method(generate, True)))


def install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Put the fakes where the SDKs' clients are (``anthropic.Anthropic``, ``openai.OpenAI``,
    ``google.genai.Client`` and their async twins)."""
    monkeypatch.setattr(anthropic, "Anthropic", _Anthropic)
    monkeypatch.setattr(anthropic, "AsyncAnthropic", _AsyncAnthropic)
    monkeypatch.setattr(openai, "OpenAI", _OpenAI)
    monkeypatch.setattr(openai, "AsyncOpenAI", _AsyncOpenAI)
    monkeypatch.setattr(genai, "Client", _GenAIClient)
