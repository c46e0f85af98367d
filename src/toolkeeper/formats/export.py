"""``export``: a set of tools in one wire format, with the name table to read calls back."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, cast

from ..core.call import ToolCall
from ..core.json import JsonObject
from ..core.results import ToolResult
from ..core.spec import DeclaresCallTypes, ToolLike
from ..errors import UsageError, WireFormatError
from .argnames import ArgumentNames
from .names import WireNames
from .problems import Problem
from .registry import Specified, declared, get_format, parse_tool_calls, render_results

__all__ = ["WireExport", "export"]


class HasToolResult(Protocol):
    """What the invoker returns: anything that can be shown as a ``ToolResult``."""

    def to_tool_result(self) -> ToolResult: ...


@dataclass(frozen=True)
class WireExport:
    """Tools declared for one provider, and what is needed to understand its answers.

    Attributes:
        api_format: The wire format.
        declarations: One declaration per tool, in order.
        tools: The value to pass as the SDK's ``tools=`` argument.
        names: The wire-name table used to map calls back.
        problems: Lint results of every tool.
    """

    api_format: str
    declarations: list[JsonObject]
    tools: list[JsonObject]
    names: WireNames
    problems: list[Problem] = field(default_factory=list)

    def parse(self, response: object) -> list[ToolCall]:
        """The calls in a provider response, named by tool name (not wire name)."""
        return parse_tool_calls(response, self.api_format, names=self.names)

    def one_call(self, call_id: str, wire: object, raw_arguments: object) -> ToolCall:
        """One call, given its id, wire name and raw arguments, as ``parse`` reads it."""
        return get_format(self.api_format).one_call(call_id, wire, raw_arguments, self.names)

    def render(self, pairs: Iterable[tuple[ToolCall, ToolResult | HasToolResult]]
               ) -> list[JsonObject]:
        """The messages carrying a batch of results back to the provider; each result is an
        ``InvocationResult`` from the invoker or a ``ToolResult``."""
        return render_results(((call, _shaped(result)) for call, result in pairs),
                              self.api_format)

    def append_turn(self, messages: list[object], response: object, calls: Sequence[ToolCall],
                    results: Sequence[ToolResult | HasToolResult]) -> list[object]:
        """One step of the agent loop: append the model's turn (taken from ``response``) and
        the results of its calls, each in the provider's shape, to ``messages``; returns it.

        ``results`` are ``InvocationResult``s from the invoker (or ``ToolResult``s), in the
        order of ``calls``. For ``openai-responses``, ``messages`` is the ``input`` list.
        """
        if len(calls) != len(results):
            raise UsageError(f"append_turn got {len(calls)} calls but {len(results)} results; "
                             "pass one result per call, in order")
        fmt = get_format(self.api_format)
        messages.extend(fmt.assistant_turn(response))
        shaped = [_shaped(r) for r in results]
        messages.extend(fmt.render_batch(zip(calls, shaped, strict=True)))
        return messages


def _shaped(result: ToolResult | HasToolResult) -> ToolResult:
    return result if isinstance(result, ToolResult) else result.to_tool_result()


def export(
    tools: Iterable[ToolLike], api_format: str, *, strict: bool = False,
    think_augment: bool | None = None,
) -> WireExport:
    """Declare ``tools`` for ``api_format`` with a collision-safe name table.

    A hosted or provider-defined tool without a declaration for this format is left out, with a
    warning in ``problems``.

    Raises:
        WireFormatError: two tools would share a wire name.
    """
    fmt = get_format(api_format)
    tools = list(tools)
    names = WireNames((t.name for t in tools), fmt.name)
    functions: list[JsonObject] = []
    provider: list[JsonObject] = []
    declarations: list[JsonObject] = []
    problems: list[Problem] = []
    for tool in tools:
        provider_tool = tool.kind != "function"  # hosted or provider-defined
        try:
            declaration, found = declared(tool, fmt.name, strict, think_augment)
        except WireFormatError as exc:
            if not provider_tool:
                raise
            problems.append(Problem(severity="warning", api_format=fmt.name, tool=tool.name,
                                    path="provider_specs", message=f"left out: {exc}"))
            continue
        wire = names.wire(tool.name)
        renamed = (None if provider_tool
                   else cast(Specified, tool).spec.wire_arguments.get(fmt.name))
        if isinstance(renamed, ArgumentNames):
            names.arguments[tool.name] = renamed
        if provider_tool:
            provider.append(declaration)
            for call_type in tool.call_types if isinstance(tool, DeclaresCallTypes) else ():
                names.route(call_type, tool.name)
        else:
            declaration = _renamed(declaration, fmt.name, wire)
            functions.append(declaration)
        declarations.append(declaration)
        problems.extend(found)
    return WireExport(api_format=fmt.name, declarations=declarations,
                      tools=fmt.tools_param(functions, provider), names=names, problems=problems)


def _renamed(declaration: JsonObject, api_format: str, wire: str) -> JsonObject:
    function = declaration.get("function")
    if isinstance(function, dict):
        return declaration if function.get("name") == wire else {
            **declaration, "function": {**function, "name": wire}}
    return declaration if declaration.get("name") == wire else {**declaration, "name": wire}
