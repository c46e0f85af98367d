"""Scripted fake models for each provider format, answering with the SDKs' own response types.

Script the turns — ``call("get_weather", city="Lisbon")`` (several calls in one turn:
``call(...) + call(...)``), ``say("Sunny.")`` — and get an object shaped like the SDK's client,
so an agent loop runs without an API key or a network:

| class | the SDK call it answers | returns |
|---|---|---|
| ``ScriptedOpenAIChat`` | ``client.chat.completions.create(...)`` | ``openai`` ``ChatCompletion`` |
| ``ScriptedOpenAIResponses`` | ``client.responses.create(...)`` | ``openai`` ``Response`` |
| ``ScriptedAnthropic`` | ``client.messages.create(...)`` | ``anthropic`` ``Message`` |
| ``ScriptedGemini`` | ``client.models.generate_content(...)`` | ``GenerateContentResponse`` |

Each keeps the keyword arguments of every request in ``requests`` (what the loop sent), and
says so when the loop asks for more turns than were scripted. Each SDK is imported when its
client answers, so only the one you use needs to be installed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING

from ..errors import UsageError

if TYPE_CHECKING:
    from anthropic.types import Message
    from google.genai.types import GenerateContentResponse
    from openai.types.chat import ChatCompletion
    from openai.types.responses import Response

__all__ = ["ScriptedAnthropic", "ScriptedCall", "ScriptedGemini", "ScriptedOpenAIChat",
           "ScriptedOpenAIResponses", "Turn", "call", "say"]


@dataclass(frozen=True, kw_only=True)
class ScriptedCall:
    """One tool call the model makes: the tool's name as the provider was shown it, the
    arguments and (optionally) the call's id (``call_<n>`` when left out)."""

    name: str
    arguments: dict[str, object] = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True, kw_only=True)
class Turn:
    """One answer of the model: text, tool calls, or both. ``turn + turn`` joins two."""

    text: str = ""
    calls: tuple[ScriptedCall, ...] = ()

    def __add__(self, other: Turn) -> Turn:
        text = " ".join(t for t in (self.text, other.text) if t)
        return Turn(text=text, calls=self.calls + other.calls)


def say(text: str) -> Turn:
    """A turn that answers ``text`` and calls no tool (the loop ends)."""
    return Turn(text=text)


def call(name: str, arguments: dict[str, object] | None = None, /, *, id: str | None = None,
         **kwargs: object) -> Turn:
    """A turn that calls tool ``name`` with ``arguments`` (a dict, or keywords)."""
    return Turn(calls=(ScriptedCall(name=name, arguments={**(arguments or {}), **kwargs},
                                    id=id),))


class _Script:
    """The turns, the requests made so far, and call ids."""

    def __init__(self, turns: Iterable[Turn | str]) -> None:
        self.turns = [say(t) if isinstance(t, str) else t for t in turns]
        bad = [t for t in self.turns if not isinstance(t, Turn)]
        if bad:
            raise UsageError(f"a scripted turn must be say('...') or call('tool', ...), got "
                             f"{type(bad[0]).__name__}")
        self.requests: list[dict[str, object]] = []
        self._ids = 0

    def next(self, request: dict[str, object]) -> Turn:
        self.requests.append(request)
        if len(self.requests) > len(self.turns):
            raise UsageError(f"the scripted model was asked for turn {len(self.requests)} but "
                             f"{len(self.turns)} were scripted; add a turn (say('...') ends "
                             "the loop)")
        return self.turns[len(self.requests) - 1]

    def ids(self, turn: Turn) -> list[tuple[str, ScriptedCall]]:
        named = []
        for made in turn.calls:
            self._ids += 1
            named.append((made.id or f"call_{self._ids}", made))
        return named


class _Scripted:
    def __init__(self, *turns: Turn | str) -> None:
        self._script = _Script(turns)

    @property
    def requests(self) -> list[dict[str, object]]:
        """The keyword arguments of every request, in order."""
        return self._script.requests


class ScriptedOpenAIChat(_Scripted):
    """``client.chat.completions.create(...)`` answering ``ChatCompletion``s."""

    def __init__(self, *turns: Turn | str, model: str = "gpt-4.1") -> None:
        super().__init__(*turns)
        self.model = model
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def create(self, **request: object) -> ChatCompletion:
        from openai.types.chat import ChatCompletion

        turn = self._script.next(request)
        calls = [{"id": i, "type": "function", "function": {
            "name": c.name, "arguments": json.dumps(c.arguments)}} for i, c in self._script.ids(turn)]
        message: dict[str, object] = {"role": "assistant", "content": turn.text or None}
        if calls:
            message["tool_calls"] = calls
        return ChatCompletion.model_validate({
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": 0,
            "model": request.get("model", self.model), "choices": [{
                "index": 0, "message": message,
                "finish_reason": "tool_calls" if calls else "stop"}]})


class ScriptedOpenAIResponses(_Scripted):
    """``client.responses.create(...)`` answering Responses API ``Response``s."""

    def __init__(self, *turns: Turn | str, model: str = "gpt-4.1") -> None:
        super().__init__(*turns)
        self.model = model
        self.responses = SimpleNamespace(create=self.create)

    def create(self, **request: object) -> Response:
        from openai.types.responses import Response

        turn = self._script.next(request)
        n = len(self.requests)
        output: list[dict[str, object]] = []
        if turn.text:
            output.append({"type": "message", "id": f"msg_{n}", "role": "assistant",
                           "status": "completed", "content": [
                               {"type": "output_text", "text": turn.text, "annotations": []}]})
        output += [{"type": "function_call", "id": f"fc_{i}", "call_id": i, "name": c.name,
                    "arguments": json.dumps(c.arguments), "status": "completed"}
                   for i, c in self._script.ids(turn)]
        return Response.model_validate({
            "id": f"resp_{n}", "object": "response", "created_at": 0,
            "model": request.get("model", self.model), "parallel_tool_calls": True,
            "tool_choice": "auto", "tools": [], "output": output})


class ScriptedAnthropic(_Scripted):
    """``client.messages.create(...)`` answering Anthropic ``Message``s."""

    def __init__(self, *turns: Turn | str, model: str = "claude-sonnet-4-5") -> None:
        super().__init__(*turns)
        self.model = model
        self.messages = SimpleNamespace(create=self.create)

    def create(self, **request: object) -> Message:
        from anthropic.types import Message

        turn = self._script.next(request)
        content: list[dict[str, object]] = [{"type": "text", "text": turn.text}] if turn.text else []
        uses = [{"type": "tool_use", "id": i, "name": c.name, "input": c.arguments}
                for i, c in self._script.ids(turn)]
        return Message.model_validate({
            "id": f"msg_{len(self.requests)}", "type": "message", "role": "assistant",
            "model": request.get("model", self.model), "content": content + uses,
            "stop_reason": "tool_use" if uses else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0}})


class ScriptedGemini(_Scripted):
    """``client.models.generate_content(...)`` answering ``GenerateContentResponse``s."""

    def __init__(self, *turns: Turn | str) -> None:
        super().__init__(*turns)
        self.models = SimpleNamespace(generate_content=self.generate_content)

    def generate_content(self, **request: object) -> GenerateContentResponse:
        from google.genai import types

        turn = self._script.next(request)
        parts: list[dict[str, object]] = [{"text": turn.text}] if turn.text else []
        parts += [{"functionCall": {"id": i, "name": c.name, "args": c.arguments}}
                  for i, c in self._script.ids(turn)]
        return types.GenerateContentResponse.model_validate({"candidates": [{
            "content": {"role": "model", "parts": parts}, "finishReason": "STOP"}]})
