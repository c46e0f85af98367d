"""Anthropic Messages API: ``input_schema`` tools, ``tool_use`` blocks, ``tool_result`` blocks."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..core.call import ToolCall
from ..core.json import JsonObject, JsonValue
from ..core.results import ContentBlock, FileBlock, ImageBlock, ToolResult
from ..core.spec import ToolSpec
from .argnames import ArgumentRule
from .base import WireFormat, as_data, block_text
from .transform import Profile

__all__ = ["AnthropicFormat"]

_STRICT = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf",
     "description", "pattern", "format", "$ref", "$defs"}
)


PROPERTY_KEYS = ArgumentRule(
    pattern=re.compile(r"[a-zA-Z0-9_.-]{1,64}"), invalid=re.compile(r"[^a-zA-Z0-9_.-]"),
    max_len=64, summary="Anthropic takes [a-zA-Z0-9_.-], at most 64",
)
"""The keys Anthropic's API takes in ``input_schema.properties``."""


class AnthropicFormat(WireFormat):
    """Declarations, ``tool_use`` parsing and ``tool_result`` rendering for Claude."""

    name = "anthropic"
    profile = Profile(name="anthropic", strict_keep=_STRICT, argument_names=PROPERTY_KEYS)

    def declaration(
        self, tool: ToolSpec, name: str, parameters: JsonObject, strict: bool
    ) -> JsonObject:
        out: JsonObject = {"name": name, "description": tool.description,
                           "input_schema": parameters}
        if strict:
            out["strict"] = True
        if tool.metadata.defer_loading:
            out["defer_loading"] = True
        return out

    def extract(self, data: object) -> list[tuple[str, str, object]]:
        if isinstance(data, dict) and "content" in data:
            blocks = data.get("content") or []
        elif isinstance(data, list):
            blocks = data
        elif isinstance(data, dict) and data.get("type") == "tool_use":
            blocks = [data]
        else:
            raise self.shape_error(data, "a Message, a list of content blocks or a tool_use block")
        if isinstance(blocks, str):
            return []
        return [
            (str(b.get("id", "")), b.get("name", ""), b.get("input"))
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "tool_use"
        ]

    def assistant_turn(self, response: object) -> list[JsonObject]:
        data = as_data(response)
        if not isinstance(data, dict) or data.get("role") != "assistant":
            raise self.shape_error(data, "a Message")
        return [{"role": "assistant", "content": data.get("content") or []}]

    def render(self, call: ToolCall, result: ToolResult) -> JsonObject:
        content: list[JsonValue] = [self._block(b) for b in result.content]
        out: JsonObject = {"type": "tool_result", "tool_use_id": call.id,
                           "content": content or [{"type": "text", "text": ""}]}
        if result.is_error:
            out["is_error"] = True
        return out

    def render_batch(self, pairs: Iterable[tuple[ToolCall, ToolResult]]) -> list[JsonObject]:
        blocks: list[JsonValue] = [self.render(call, result) for call, result in pairs]
        return [{"role": "user", "content": blocks}] if blocks else []

    @staticmethod
    def _block(block: ContentBlock) -> JsonObject:
        source: JsonObject
        if isinstance(block, ImageBlock):
            source = {"type": "base64", "media_type": block.media_type, "data": block.data}
            return {"type": "image", "source": source}
        if isinstance(block, FileBlock) and block.data and block.media_type == "application/pdf":
            source = {"type": "base64", "media_type": block.media_type, "data": block.data}
            return {"type": "document", "source": source}
        return {"type": "text", "text": block_text(block)}
