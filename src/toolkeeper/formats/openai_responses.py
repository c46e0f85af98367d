"""OpenAI Responses API: ``function`` tools, ``function_call`` items, ``function_call_output``."""

from __future__ import annotations

from typing import Any

from ..core.call import ToolCall
from ..core.json import JsonObject
from ..core.results import FileBlock, ImageBlock, ToolResult
from .base import WireFormat, as_data, block_text, data_url
from .openai_chat import OPENAI_STRICT_KEYWORDS
from .transform import Profile

__all__ = ["OpenAIResponsesFormat"]


class OpenAIResponsesFormat(WireFormat):
    """The Responses API. Its ``strict`` defaults to true, so it is always sent explicitly."""

    name = "openai-responses"
    profile = Profile(name="openai-responses", strict_keep=OPENAI_STRICT_KEYWORDS)

    def declaration(
        self, tool: Any, name: str, parameters: dict[str, Any], strict: bool
    ) -> JsonObject:
        out = {"type": "function", "name": name, "description": tool.description,
               "parameters": parameters, "strict": strict}
        if tool.metadata.defer_loading:
            out["defer_loading"] = True
        return out

    def extract(self, data: object) -> list[tuple[str, str, Any]]:
        if isinstance(data, dict) and "output" in data:
            items = data.get("output") or []
        elif isinstance(data, list):
            items = data
        elif isinstance(data, dict) and data.get("type") == "function_call":
            items = [data]
        else:
            raise self.shape_error(data, "a Response, a list of output items or a function_call")
        out = []
        for item in items:
            if not isinstance(item, dict) or item.get("type") != "function_call":
                continue
            call_id = item.get("call_id") or item.get("id") or ""
            out.append((str(call_id), item.get("name", ""), item.get("arguments")))
        return out

    def assistant_turn(self, response: object) -> list[JsonObject]:
        data = as_data(response)
        if not isinstance(data, dict) or "output" not in data:
            raise self.shape_error(data, "a Response")
        return [item for item in data.get("output") or [] if isinstance(item, dict)]

    def render(self, call: ToolCall, result: ToolResult) -> JsonObject:
        has_media = any(isinstance(b, ImageBlock | FileBlock) and b.data for b in result.content)
        output: Any = [self._part(b) for b in result.content] if has_media else result.text
        return {"type": "function_call_output", "call_id": call.id, "output": output}

    @staticmethod
    def _part(block: Any) -> JsonObject:
        if isinstance(block, ImageBlock):
            return {"type": "input_image", "image_url": data_url(block)}
        if isinstance(block, FileBlock) and block.data:
            return {"type": "input_file", "filename": block.name or "file",
                    "file_data": data_url(block)}
        return {"type": "input_text", "text": block_text(block)}
