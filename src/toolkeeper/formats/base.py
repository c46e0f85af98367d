"""What every wire format does: declare tools, parse calls, render results."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Literal, cast

from ..core.call import CallProblem, ToolCall
from ..core.json import JsonObject
from ..core.results import AudioBlock, FileBlock, ImageBlock, ToolResult, block_text
from ..core.spec import ToolSpec
from ..errors import UnknownToolError, UsageError, WireFormatError
from .argnames import ArgumentNames, rename_table
from .names import WireNames, name_rule, wire_name
from .problems import Problem
from .transform import Profile, SchemaTransformer, StrictImpossible

__all__ = ["THINK_PROPERTY", "WireFormat", "as_data", "block_text", "decode_arguments"]

THINK_PROPERTY: JsonObject = {
    "type": "string",
    "description": "Why you chose this tool and what you expect from it.",
}


def as_data(payload: object) -> object:
    """A provider SDK object (pydantic model) or plain data, as plain JSON-like data."""
    dump = getattr(payload, "model_dump", None)
    if callable(dump):
        dumped: object = dump(mode="json", exclude_none=True)
        return dumped
    to_dict = getattr(payload, "to_dict", None)
    if callable(to_dict) and not isinstance(payload, Mapping):
        plain: object = to_dict()
        return plain
    if isinstance(payload, Sequence) and not isinstance(payload, str | bytes):
        return [as_data(item) for item in payload]
    return payload


class _WrongTypes:
    """Reading a payload: a part of the wrong type met on the way (an ``AttributeError``, a
    ``TypeError``…) becomes a ``WireFormatError`` that says so."""

    __slots__ = ("fmt",)

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> Literal[False]:
        if exc is None or isinstance(exc, WireFormatError) or not isinstance(
                exc, AttributeError | TypeError | KeyError | IndexError | ValueError):
            return False
        raise WireFormatError(
            f"{self.fmt}: part of the payload has the wrong type ({type(exc).__name__}: "
            f"{exc}); pass the provider's response object or its JSON form"
        ) from exc


def decode_arguments(raw: object) -> tuple[dict[str, object], str | None, CallProblem | None]:
    """Decode a call's arguments; malformed ones become a ``CallProblem``, never an exception."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, raw, None
    if isinstance(raw, Mapping):
        return dict(raw), None, None
    if not isinstance(raw, str):
        return {}, None, CallProblem(
            code="malformed_call",
            message=f"arguments must be a JSON object, got {type(raw).__name__}",
        )
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, raw, CallProblem(
            code="malformed_call",
            message=f"arguments are not valid JSON ({exc.msg} at line {exc.lineno} column "
            f"{exc.colno}); send the arguments as one JSON object",
        )
    if not isinstance(value, dict):
        return {}, raw, CallProblem(
            code="malformed_call",
            message=f"arguments must be a JSON object, got JSON {type(value).__name__}",
        )
    return value, raw, None


def _with_think(schema: JsonObject) -> JsonObject:
    found = schema.get("properties")
    properties = found if isinstance(found, dict) else {}
    if "toolcall_reason" in properties:
        return schema
    return {**schema, "properties": {**properties, "toolcall_reason": THINK_PROPERTY}}


def _needs_no_projection(schema: JsonObject, profile: Profile) -> bool:
    """A permissive profile shows an object schema without references exactly as it is; a
    profile whose dialect is JSON Schema 2020-12 (``as_is``) any object schema."""
    if profile.as_is:
        return schema.get("type") == "object"
    return (
        schema.get("type") == "object" and "properties" in schema
        and "$defs" not in schema and "definitions" not in schema and "$schema" not in schema
    )


class WireFormat:
    """Base of the five wire formats. Subclasses fill in the shapes."""

    name: str = ""
    profile: Profile = Profile(name="")

    # -- declarations --------------------------------------------------------------------

    def declare(
        self, tool: ToolSpec, *, strict: bool = False, think_augment: bool | None = None
    ) -> tuple[JsonObject, Sequence[Problem]]:
        """A function tool's declaration (from its spec) and the problems met building it."""
        name = tool.name
        schema = dict(tool.parameters)
        think = think_augment if think_augment is not None else tool.metadata.think_augment
        if think:
            schema = _with_think(schema)
        rule = name_rule(self.name)
        renames = self._renames(tool, schema)
        if (not strict and self.profile.keep is None and tool.description and not renames
                and (rule is None or rule.pattern.fullmatch(name))
                and _needs_no_projection(schema, self.profile)):
            return self.declaration(tool, name, schema, False), ()  # the common, quick case
        return self._declare_projected(tool, schema, strict, renames)

    def _renames(self, tool: ToolSpec, schema: JsonObject) -> dict[str, str]:
        """The argument names this provider does not take, renamed; the table to map a call's
        arguments back is kept on the spec (``ToolSpec.wire_arguments``)."""
        rule = self.profile.argument_names
        if rule is None:
            return {}
        table = rename_table(schema, rule)
        if table:
            tool.wire_arguments[self.name] = ArgumentNames(table, schema)
        return table

    def _declare_projected(
        self, tool: ToolSpec, schema: JsonObject, strict: bool,
        renames: dict[str, str] | None = None,
    ) -> tuple[JsonObject, list[Problem]]:
        problems: list[Problem] = []
        name = wire_name(tool.name, self.name)
        if name != tool.name:
            problems.append(self._problem("info", tool.name, "name", f"name is not valid here; "
                                          f"sent as '{name}' and mapped back on calls"))
        if not tool.description.strip():
            problems.append(self._problem("warning", tool.name, "description",
                                          "no description; models choose tools by it"))
        params, strict_applied = self._parameters(tool.name, schema, strict, problems,
                                                  renames or {})
        return self.declaration(tool, name, params, strict_applied), problems

    def _parameters(
        self, tool: str, schema: JsonObject, strict: bool, problems: list[Problem],
        renames: dict[str, str],
    ) -> tuple[JsonObject, bool]:
        if not strict and self.profile.keep is None and not renames \
                and _needs_no_projection(schema, self.profile):
            return schema, False
        if strict and self.profile.strict_keep is None:
            problems.append(self._problem("error", tool, "strict",
                                          f"{self.name} has no strict mode; declared without it"))
            strict = False
        if strict:
            transformer = SchemaTransformer(self.profile, tool, strict=True, renames=renames)
            try:
                out = transformer.transform(schema)
            except StrictImpossible as exc:
                problems.append(self._problem("error", tool, "strict", f"strict mode is not "
                                              f"possible: {exc}; declared without it"))
            else:
                problems.extend(transformer.problems)
                return out, True
        transformer = SchemaTransformer(self.profile, tool, renames=renames)
        out = transformer.transform(schema)
        problems.extend(transformer.problems)
        return out, False

    def _problem(self, severity: Literal["error", "warning", "info"], tool: str, path: str,
                 message: str) -> Problem:
        return Problem(severity=severity, api_format=self.name, tool=tool, path=path,
                       message=message)

    def declaration(
        self, tool: ToolSpec, name: str, parameters: JsonObject, strict: bool
    ) -> JsonObject:
        """The provider's declaration dict (format-specific)."""
        raise NotImplementedError

    def tools_param(
        self, functions: Sequence[JsonObject], provider: Sequence[JsonObject] = ()
    ) -> list[JsonObject]:
        """The value to pass as the SDK's ``tools=`` argument (function and provider tools)."""
        return [*functions, *provider]

    # -- calls --------------------------------------------------------------------------

    def parse(self, payload: object, names: WireNames | None = None) -> list[ToolCall]:
        """Every tool call in a provider response (dict or SDK object), in order."""
        data = as_data(payload)
        with _WrongTypes(self.name):
            return self.calls(data, names)

    def one_call(self, call_id: str, wire: object, raw_arguments: object,
                 names: WireNames | None = None) -> ToolCall:
        """The call of one already extracted (id, wire name, raw arguments), as ``parse``
        reads each call of a payload (a server handed one call's parts skips the payload)."""
        with _WrongTypes(self.name):
            return self._call((call_id, cast(str, wire), raw_arguments), names)

    def calls(self, data: object, names: WireNames | None) -> list[ToolCall]:
        """The calls in a payload already turned into plain data (``extract``'s, named)."""
        return [self._call(item, names) for item in self.extract(data)]

    def extract(self, data: object) -> list[tuple[str, str, object]]:
        """(id, wire name, raw arguments) for each call in the payload (format-specific)."""
        raise NotImplementedError

    def _call(self, item: tuple[str, str, object], names: WireNames | None) -> ToolCall:
        call_id, wire, raw_args = item
        arguments, raw, problem = decode_arguments(raw_args)
        if not isinstance(wire, str) or not wire:
            problem = CallProblem(code="malformed_call",
                                  message=f"the call names no tool (got {wire!r})")
            wire = ""
        name = wire
        if names is not None and wire:
            try:
                name = names.name(wire)
            except UnknownToolError as exc:
                problem = problem or CallProblem(code=exc.code, message=exc.message)
            else:
                arguments = names.decode(name, arguments)
        return ToolCall(id=str(call_id), name=name, arguments=arguments, wire_name=wire,
                        raw_arguments=raw, problem=problem, api_format=self.name)

    def shape_error(self, data: object, expected: str) -> WireFormatError:
        keys = sorted(data)[:8] if isinstance(data, Mapping) else type(data).__name__
        return WireFormatError(f"{self.name}: expected {expected}; got {keys}")

    # -- results ------------------------------------------------------------------------

    def render(self, call: ToolCall, result: ToolResult) -> JsonObject:
        """The provider's message (or item) carrying one call's result."""
        raise NotImplementedError

    def render_batch(
        self, pairs: Iterable[tuple[ToolCall, ToolResult]]
    ) -> list[JsonObject]:
        """The messages to append to the conversation for a batch of results."""
        return [self.render(call, result) for call, result in pairs]

    def assistant_turn(self, response: object) -> list[JsonObject]:
        """The model's own turn in a response, as the items to append to the conversation
        before the tool results (the provider wants its calls back before their results).

        Raises:
            UsageError: this format has no conversation (``mcp``, ``native``).
            WireFormatError: ``response`` is not a response of this format.
        """
        raise UsageError(f"{self.name} has no conversation to append a turn to; use "
                         "render() for its results")

    def wire_of(self, call: ToolCall) -> str:
        return call.wire_name or wire_name(call.name, self.name)


def data_url(block: ImageBlock | AudioBlock | FileBlock) -> str:
    return f"data:{block.media_type};base64,{block.data or ''}"
