"""OpenAI Chat Completions: ``tools=[{"type": "function", "function": {...}}]``."""

from __future__ import annotations

from collections.abc import Iterable

from ..core.call import ToolCall
from ..core.json import JsonObject, JsonValue
from ..core.results import ImageBlock, ToolResult
from ..core.spec import ToolSpec
from .base import WireFormat, as_data, data_url
from .transform import Profile

__all__ = ["OPENAI_STRICT_KEYWORDS", "OpenAIChatFormat"]

OPENAI_STRICT_KEYWORDS = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf",
     "description", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
     "exclusiveMaximum", "multipleOf", "minItems", "maxItems", "$ref", "$defs"}
)


class OpenAIChatFormat(WireFormat):
    """Declarations, calls and ``tool`` messages of the Chat Completions API."""

    name = "openai-chat"
    profile = Profile(name="openai-chat", strict_keep=OPENAI_STRICT_KEYWORDS)

    def declaration(
        self, tool: ToolSpec, name: str, parameters: JsonObject, strict: bool
    ) -> JsonObject:
        function: JsonObject = {"name": name, "description": tool.description,
                                "parameters": parameters}
        if strict:
            function["strict"] = True
        return {"type": "function", "function": function}

    def extract(self, data: object) -> list[tuple[str, str, object]]:
        if isinstance(data, dict) and "choices" in data:
            calls: list[object] = []
            for choice in data.get("choices") or []:
                calls.extend(((choice or {}).get("message") or {}).get("tool_calls") or [])
        elif isinstance(data, dict) and ("tool_calls" in data or data.get("role") == "assistant"):
            calls = list(data.get("tool_calls") or [])
        elif isinstance(data, list):
            calls = data
        else:
            raise self.shape_error(data, "a ChatCompletion, an assistant message or a list of "
                                   "tool calls")
        out: list[tuple[str, str, object]] = []
        for call in calls:
            item = call if isinstance(call, dict) else {}
            function = item.get("function") or {}
            if not isinstance(function, dict) or "name" not in function:
                raise self.shape_error(call, "a tool call with function.name")
            out.append((str(item.get("id") or ""), function["name"], function.get("arguments")))
        return out

    def assistant_turn(self, response: object) -> list[JsonObject]:
        data = as_data(response)
        if isinstance(data, dict) and "choices" in data:
            data = ((data.get("choices") or [{}])[0] or {}).get("message") or {}
        if not isinstance(data, dict) or data.get("role") != "assistant":
            raise self.shape_error(data, "a ChatCompletion or an assistant message")
        turn = {"role": "assistant", "content": data.get("content")}
        if data.get("tool_calls"):
            turn["tool_calls"] = data["tool_calls"]
        return [turn]

    def render(self, call: ToolCall, result: ToolResult) -> JsonObject:
        return {"role": "tool", "tool_call_id": call.id, "content": result.text}

    def render_batch(self, pairs: Iterable[tuple[ToolCall, ToolResult]]) -> list[JsonObject]:
        messages: list[JsonObject] = []
        images: list[JsonValue] = []
        for call, result in pairs:
            messages.append(self.render(call, result))
            for block in result.content:
                if isinstance(block, ImageBlock):
                    images.append({"type": "image_url", "image_url": {"url": data_url(block)}})
        if images:
            note: JsonObject = {"type": "text", "text": "Images returned by the tool calls above:"}
            messages.append({"role": "user", "content": [note, *images]})
        return messages
