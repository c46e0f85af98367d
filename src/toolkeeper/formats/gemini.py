"""Google Gemini: ``functionDeclarations`` in the OpenAPI 3.0 subset, ``functionCall`` parts,
``functionResponse`` parts."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ..core.call import ToolCall
from ..core.json import JsonObject, JsonValue, as_json
from ..core.results import ImageBlock, ToolResult
from ..core.spec import ToolSpec
from .argnames import ArgumentRule
from .base import WireFormat, as_data
from .transform import Profile

__all__ = ["GeminiFormat"]

PARAMETER_NAMES = ArgumentRule(
    pattern=re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}"), invalid=re.compile(r"[^A-Za-z0-9_]"),
    max_len=64, must_start=re.compile(r"[A-Za-z_]"),
    summary="Gemini takes ASCII letters, digits and underscores, starting with a letter or an "
            "underscore, at most 64",
)
"""Gemini's rule for parameter names, as the google-genai SDK documents it."""

_KEEP = frozenset(
    {"type", "format", "description", "nullable", "enum", "properties", "required", "items",
     "minItems", "maxItems", "minimum", "maximum", "anyOf", "propertyOrdering", "minLength",
     "maxLength", "pattern", "default", "minProperties", "maxProperties", "example"}
)


class GeminiFormat(WireFormat):
    """Gemini API (REST JSON, camelCase; the ``google-genai`` SDK accepts the same dicts)."""

    name = "gemini"
    profile = Profile(name="gemini", keep=_KEEP, openapi_subset=True, refs=False,
                      argument_names=PARAMETER_NAMES)

    def declaration(
        self, tool: ToolSpec, name: str, parameters: JsonObject, strict: bool
    ) -> JsonObject:
        out: JsonObject = {"name": name, "description": tool.description}
        if parameters.get("properties"):
            out["parameters"] = parameters
        return out

    def tools_param(
        self, functions: Sequence[JsonObject], provider: Sequence[JsonObject] = ()
    ) -> list[JsonObject]:
        declared: list[JsonValue] = [*functions]
        head: list[JsonObject] = [{"functionDeclarations": declared}] if functions else []
        return [*head, *provider]

    def extract(self, data: object) -> list[tuple[str, str, object]]:
        parts = self._parts(data)
        out = []
        for index, part in enumerate(parts):
            if not isinstance(part, dict):
                continue
            call = part.get("functionCall") or part.get("function_call")
            if not isinstance(call, dict):
                continue
            call_id = call.get("id") or f"call_{index}"
            out.append((str(call_id), call.get("name", ""), call.get("args")))
        return out

    def _parts(self, data: object) -> list[object]:
        if isinstance(data, dict) and "candidates" in data:
            parts: list[object] = []
            for candidate in data.get("candidates") or []:
                parts.extend(((candidate or {}).get("content") or {}).get("parts") or [])
            return parts
        if isinstance(data, dict) and "parts" in data:
            return list(data.get("parts") or [])
        if isinstance(data, list):
            return data
        if isinstance(data, dict) and ("functionCall" in data or "function_call" in data):
            return [data]
        raise self.shape_error(data, "a GenerateContentResponse, a Content or a list of parts")

    def assistant_turn(self, response: object) -> list[JsonObject]:
        data = as_data(response)
        if isinstance(data, dict) and "candidates" in data:
            data = ((data.get("candidates") or [{}])[0] or {}).get("content") or {}
        if not isinstance(data, dict) or "parts" not in data:
            raise self.shape_error(data, "a GenerateContentResponse or a Content")
        return [{"role": data.get("role") or "model", "parts": data.get("parts") or []}]

    def render(self, call: ToolCall, result: ToolResult) -> JsonObject:
        payload: JsonObject
        if result.is_error:
            payload = {"error": result.text}
        elif result.structured_content is not None \
                and result.structured_content != {"result": result.text}:
            payload = {"output": as_json(result.structured_content)}
        else:
            payload = {"output": result.text}
        response: JsonObject = {"name": self.wire_of(call), "response": payload}
        if call.id and not call.id.startswith("call_"):
            response["id"] = call.id
        images = [b for b in result.content if isinstance(b, ImageBlock)]
        if images:
            response["parts"] = [
                {"inlineData": {"mimeType": b.media_type, "data": b.data}} for b in images
            ]
        return {"functionResponse": response}

    def render_batch(self, pairs: Iterable[tuple[ToolCall, ToolResult]]) -> list[JsonObject]:
        parts: list[JsonValue] = [self.render(call, result) for call, result in pairs]
        return [{"role": "user", "parts": parts}] if parts else []
