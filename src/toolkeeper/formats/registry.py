"""The formats by name, and the functions of a tool spec and a call built on them: declare
(cached on the spec), check, parse, render."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, cast

from ..core.call import ToolCall
from ..core.json import JsonObject
from ..core.results import ToolResult
from ..core.spec import ToolLike, ToolSpec
from ..errors import UsageError
from .anthropic import AnthropicFormat
from .base import WireFormat
from .gemini import GeminiFormat
from .mcp import MCPFormat
from .names import WireNames
from .native import NativeFormat
from .openai_chat import OpenAIChatFormat
from .openai_responses import OpenAIResponsesFormat
from .problems import Problem

__all__ = ["API_FORMATS", "Specified", "check", "declare", "declared", "get_format", "parse_tool_calls",
           "render_result", "render_results"]

_FORMATS: dict[str, WireFormat] = {
    f.name: f
    for f in (OpenAIChatFormat(), OpenAIResponsesFormat(), AnthropicFormat(), GeminiFormat(),
              MCPFormat(), NativeFormat())
}
_ALIASES = {"openai": "openai-chat", "openai-response": "openai-responses", "claude": "anthropic",
            "google": "gemini", "toolkeeper": "native"}
API_FORMATS: tuple[str, ...] = tuple(_FORMATS)


def get_format(api_format: str) -> WireFormat:
    """The wire format named ``api_format`` (also: openai, claude, google; and
    ``openai-response``, the registry library's spelling of ``openai-responses``, a
    second name kept for good: a name of the public contract)."""
    key = _ALIASES.get(api_format, api_format)
    try:
        return _FORMATS[key]
    except KeyError:
        raise UsageError(
            f"unknown API format {api_format!r}; use one of {', '.join(API_FORMATS)}"
        ) from None




class Specified(Protocol):
    """A function tool: it has a spec (``Tool`` and every tool of kind ``function``)."""

    @property
    def spec(self) -> ToolSpec: ...


def declared(tool: ToolLike, api_format: str, strict: bool, think: bool | None
             ) -> tuple[JsonObject, Sequence[Problem]]:
    """(declaration, problems) of ``tool`` in ``api_format``. A function tool's are computed
    from its spec once and cached on the spec; hosted and provider-defined tools declare
    themselves."""
    fmt = _FORMATS.get(api_format) or get_format(api_format)
    if tool.kind != "function":
        return tool.get_schema(fmt.name), ()
    spec = cast(Specified, tool).spec
    # The cache rides on the spec (``ToolSpec.declared``): no lookup table, gone with the spec.
    # (A WeakKeyDictionary made a weak reference per lookup — 3 µs per tool on repeat exports;
    # a dict by id() needed a finalizer per spec — 3 µs per tool on the first.)
    cached = spec.declared
    key = api_format if not strict and think is None else (api_format, strict, think)
    found = cached.get(key)
    if found is None:
        found = cached[key] = fmt.declare(spec, strict=strict, think_augment=think)
    declaration, problems = found
    return declaration, cast("Sequence[Problem]", problems)


def declare(
    tool: ToolLike, api_format: str = "openai-chat", *, strict: bool = False,
    think_augment: bool | None = None,
) -> JsonObject:
    """A tool's declaration in ``api_format``; cached on the tool and shared (copy to change)."""
    declaration, _ = declared(tool, api_format, strict, think_augment)
    return declaration


def check(tool: ToolLike, api_format: str, *, strict: bool = False) -> list[Problem]:
    """Lint: what exporting ``tool`` to ``api_format`` changes, loses or cannot honour."""
    _, problems = declared(tool, api_format, strict, None)
    return list(problems)


def parse_tool_calls(
    response: object, api_format: str, *, names: WireNames | None = None
) -> list[ToolCall]:
    """Every tool call in a provider response (a dict or the SDK's own object), in order.

    Arguments that are not valid JSON give a call with ``problem`` set rather than an exception.
    With ``names`` (from ``export``), wire names are mapped back to tool names and a name that
    was not offered gives a call with an ``unknown_tool`` problem.

    Raises:
        WireFormatError: the payload is not shaped like a response of ``api_format`` at all.
    """
    return get_format(api_format).parse(response, names)


def render_result(call: ToolCall, result: ToolResult, api_format: str) -> JsonObject:
    """One result as the provider's tool-result message or item."""
    return get_format(api_format).render(call, result)


def render_results(
    pairs: Iterable[tuple[ToolCall, ToolResult]], api_format: str
) -> list[JsonObject]:
    """The messages to append to the conversation for a batch of results."""
    return get_format(api_format).render_batch(pairs)

