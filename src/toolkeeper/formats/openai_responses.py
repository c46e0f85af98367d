"""OpenAI Responses API: ``function`` tools, ``function_call`` items, ``function_call_output``;
the items of provider-defined tools (``computer_call``…) in ``provider_items``."""

from __future__ import annotations

from ..core.call import ToolCall
from ..core.json import JsonObject, JsonValue
from ..core.results import ContentBlock, FileBlock, ImageBlock, ToolResult
from ..core.spec import ToolSpec
from .base import WireFormat, as_data, block_text, data_url
from .names import WireNames
from .openai_chat import OPENAI_STRICT_KEYWORDS
from .provider_items import provider_call, provider_output
from .transform import Profile

__all__ = ["OpenAIResponsesFormat"]


class OpenAIResponsesFormat(WireFormat):
    """The Responses API. Its ``strict`` defaults to true, so it is always sent explicitly."""

    name = "openai-responses"
    profile = Profile(name="openai-responses", strict_keep=OPENAI_STRICT_KEYWORDS)

    def declaration(
        self, tool: ToolSpec, name: str, parameters: JsonObject, strict: bool
    ) -> JsonObject:
        out: JsonObject = {"type": "function", "name": name, "description": tool.description,
               "parameters": parameters, "strict": strict}
        if tool.metadata.defer_loading:
            out["defer_loading"] = True
        return out

    def calls(self, data: object, names: WireNames | None) -> list[ToolCall]:
        """``function_call`` items, and the items of the types a provider-defined tool declared
        in ``call_types`` (in ``names``, from ``export``), in response order."""
        out = []
        for item in self._items(data):
            if not isinstance(item, dict):
                continue
            if item.get("type") == "function_call":
                call_id = item.get("call_id") or item.get("id") or ""
                out.append(self._call((str(call_id), item.get("name", ""),
                                       item.get("arguments")), names))
            elif (routed := provider_call(item, names, self.name)) is not None:
                out.append(routed)
        return out

    def _items(self, data: object) -> list[object]:
        if isinstance(data, dict) and "output" in data:
            return list(data.get("output") or [])
        if isinstance(data, list):
            return data
        if isinstance(data, dict) and isinstance(data.get("type"), str):
            return [data]
        raise self.shape_error(data, "a Response, a list of output items or a function_call")

    def assistant_turn(self, response: object) -> list[JsonObject]:
        data = as_data(response)
        if not isinstance(data, dict) or "output" not in data:
            raise self.shape_error(data, "a Response")
        return [item for item in data.get("output") or [] if isinstance(item, dict)]

    def render(self, call: ToolCall, result: ToolResult) -> JsonObject:
        if call.call_type is not None and call.call_type != "function_call":
            return provider_output(call, result)
        has_media = any(isinstance(b, ImageBlock | FileBlock) and b.data for b in result.content)
        output: JsonValue = result.text
        if has_media:
            parts: list[JsonValue] = [self._part(b) for b in result.content]
            output = parts
        return {"type": "function_call_output", "call_id": call.id, "output": output}

    @staticmethod
    def _part(block: ContentBlock) -> JsonObject:
        if isinstance(block, ImageBlock):
            return {"type": "input_image", "image_url": data_url(block)}
        if isinstance(block, FileBlock) and block.data:
            return {"type": "input_file", "filename": block.name or "file",
                    "file_data": data_url(block)}
        return {"type": "input_text", "text": block_text(block)}
