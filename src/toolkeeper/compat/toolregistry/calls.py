"""toolregistry's formats: their names (with its aliases and deprecations), a call in any of
them read into a ``ToolCall`` (the format found from the call's own shape, as toolregistry finds
it), and the messages of a tool-calling round trip."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Sequence

from ...core.call import ToolCall
from ...core.json import JsonObject, JsonValue, as_json
from ...core.results import ToolResult, to_tool_result
from ...formats import WireNames, get_format, render_results
from ...formats.base import as_data, decode_arguments

__all__ = ["API_FORMATS", "api_format", "call_format", "messages", "read_call"]

API_FORMATS = ("openai-chat", "openai-responses", "anthropic", "gemini", "google-interactions",
               "rosetta-ir")
_DEPRECATED = {"openai": "openai-chat", "openai-chatcompletion": "openai-chat",
               "openai-response": "openai-responses"}
_ALIASES = {"open-responses": "openai-responses"}
_OWN = ("google-interactions", "rosetta-ir")  # formats toolkeeper has no wire format for


def api_format(name: str) -> str:
    """The canonical name of a format; a deprecated name warns, an unknown one is a
    ``ValueError`` naming it."""
    if name in _ALIASES:
        return _ALIASES[name]
    if name in _DEPRECATED:
        canonical = _DEPRECATED[name]
        warnings.warn(f'api_format="{name}" is deprecated, use "{canonical}" instead.',
                      DeprecationWarning, stacklevel=3)
        return canonical
    if name not in API_FORMATS:
        raise ValueError(f"Unsupported API format: {name} (use one of {', '.join(API_FORMATS)})")
    return name


def call_format(data: object) -> str | None:
    """Which format one call dict is in, from its shape; ``None`` when it is in none."""
    if not isinstance(data, dict):
        return None
    kind = data.get("type")
    if kind == "tool_use":
        return "anthropic"
    if "functionCall" in data or "function_call" in data:
        return "gemini"
    if isinstance(data.get("function"), dict):
        return "openai-chat"
    if kind == "function_call" and "call_id" in data:
        return "openai-responses"
    if kind == "function_call" and "id" in data:
        return "google-interactions"
    if isinstance(data.get("name"), str) and "args" in data:
        return "gemini"
    return None


def read_call(call: object, names: Callable[[str], WireNames], index: int) -> ToolCall:
    """One call from the model, in whichever format it came, as a ``ToolCall`` under the
    tool's own names (``names``: a format's table of the registry's tools).

    Raises:
        TypeError: the call is in no format toolregistry reads (its message, its type).
    """
    if isinstance(call, ToolCall):
        return call
    data = as_data(call)
    fmt = call_format(data)
    if fmt is None or not isinstance(data, dict):
        raise TypeError(f"Unsupported tool call format: {type(call)}. Expected OpenAI, "
                        "Anthropic, Gemini, or Google Interactions tool call format.")
    if fmt == "google-interactions":
        arguments, raw, problem = decode_arguments(data.get("arguments"))
        return ToolCall(id=str(data["id"]), name=str(data.get("name", "")),
                        arguments=arguments, raw_arguments=raw, problem=problem)
    (parsed,) = get_format(fmt).parse([data], names(fmt))
    part = data.get("functionCall") or data.get("function_call") or data
    if fmt == "gemini" and not part.get("id"):  # numbered in the batch, not within one part
        parsed = ToolCall(id=f"call_{index}", name=parsed.name, arguments=parsed.arguments,
                          wire_name=parsed.wire_name, raw_arguments=parsed.raw_arguments,
                          problem=parsed.problem, api_format=parsed.api_format)
    return parsed


def messages(api_format: str, calls: Sequence[ToolCall],
             results: Sequence[tuple[str, bool]]) -> list[JsonObject]:
    """The assistant's turn asking for ``calls`` and the turn carrying their ``results``
    (text, is_error), in ``api_format``."""
    if api_format == "rosetta-ir":
        return _rosetta(calls, results)
    if api_format == "google-interactions":
        asked: list[JsonObject] = [{"type": "function_call", "id": c.id, "name": c.name,
                                    "arguments": as_json(c.arguments)} for c in calls]
        answered: list[JsonObject] = [{"type": "function_result", "call_id": c.id,
                                       "result": text}
                                      for c, (text, _) in zip(calls, results, strict=True)]
        return asked + answered
    shown = [ToolResult.error(text) if error else to_tool_result(text) for text, error in results]
    return [*_assistant(api_format, calls),
            *render_results(zip(calls, shown, strict=True), api_format)]


def _assistant(api_format: str, calls: Sequence[ToolCall]) -> list[JsonObject]:
    if api_format == "openai-chat":
        asked: list[JsonValue] = [{"id": c.id, "type": "function", "function": {
            "name": _wire(c), "arguments": _json(c)}} for c in calls]
        return [{"role": "assistant", "tool_calls": asked}]
    if api_format == "openai-responses":
        return [{"type": "function_call", "call_id": c.id, "name": _wire(c),
                 "arguments": _json(c)} for c in calls]
    if api_format == "anthropic":
        uses: list[JsonValue] = [{"type": "tool_use", "id": c.id, "name": _wire(c),
                                  "input": as_json(c.arguments)} for c in calls]
        return [{"role": "assistant", "content": uses}]
    parts: list[JsonValue] = [{"functionCall": {"name": _wire(c), "args": as_json(c.arguments)}}
                              for c in calls]
    return [{"role": "model", "parts": parts}]


def _rosetta(calls: Sequence[ToolCall], results: Sequence[tuple[str, bool]]) -> list[JsonObject]:
    parts: list[JsonValue] = [{"type": "tool_call", "tool_call_id": c.id, "tool_name": c.name,
                               "tool_input": as_json(c.arguments), "tool_type": "function"}
                              for c in calls]
    outcomes: list[JsonValue] = [{"type": "tool_result", "tool_call_id": c.id, "result": text,
                                  **({"is_error": True} if error else {})}
                                 for c, (text, error) in zip(calls, results, strict=True)]
    return [{"role": "assistant", "parts": parts}, {"role": "tool", "parts": outcomes}]


def _wire(call: ToolCall) -> str:
    return call.wire_name or call.name


def _json(call: ToolCall) -> str:
    return call.raw_arguments if call.raw_arguments is not None else json.dumps(call.arguments)
