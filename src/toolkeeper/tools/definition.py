"""``ToolDefinition``: what a tool is, as one frozen value, and the builders that make one.

A ``Tool`` holds one definition and reads every field from it; a changed tool is a new definition
(``derive``), never a field written in place. The builders do the work once: ``define`` checks a
raw JSON Schema and resolves the risk ladder, ``define_function`` takes what ``inspect_function``
learnt from a function's signature and docstring.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Generic, Protocol, TypedDict, TypeVar, Unpack, cast, overload

from pydantic import BaseModel

from ..core.json import JsonObject
from ..core.metadata import DEFAULT_METADATA, ToolMetadata
from ..core.risk import HitlMode, ToolRisk, default_hitl_mode
from ..errors import UsageError
from .naming import normalize_tool_name, qualify
from .rawschema import normalize_schema
from .signature import FunctionInfo, is_async_callable

__all__ = ["FIELDS", "Defaults", "Defined", "HasDefinition", "ToolChanges", "ToolDefinition",
           "ToolOptions", "define", "define_function", "derive", "shown"]

_ASYNC_METADATA = ToolMetadata(is_async=True)
_NORMALIZE_STACK = 4
"""How far up ``normalize_schema``'s warning points: at the line that made the tool."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolDefinition:
    """Everything a tool is, as data (the callable included): built once, never changed.

    Attributes:
        name: Name the model calls the tool by (``namespace-method_name`` when namespaced).
        description: What the tool does, for the model.
        parameters: JSON Schema (an object schema) of the arguments.
        callable: The function that runs the tool (``None`` for a declaration only).
        metadata: Behavioural and classification metadata.
        namespace: Group the tool belongs to, if any.
        method_name: The name before the namespace was added.
        risk: Position on the risk ladder.
        hitl_mode: How a human is asked before the tool runs.
        hitl_explicit: Whether the HITL mode was chosen rather than inherited from the risk.
        output_schema: A JSON Schema of the structured result given explicitly (a function's
            return annotation gives one through ``function`` otherwise).
        parameters_model: A pydantic model given to validate the arguments with.
        function: What was learnt from the function, for a tool made from one.
        schema_warnings: Problems left in a raw schema that could not be repaired.
        preflight: The tool's pre-flight check, if it declares one: called with a call's
            validated arguments (as keywords) before a person is asked, it raises what the
            tool's own run would raise for them (sync or async).
    """

    name: str
    description: str = ""
    parameters: JsonObject
    callable: Callable[..., object] | None = None
    metadata: ToolMetadata = DEFAULT_METADATA
    namespace: str | None = None
    method_name: str | None = None
    risk: ToolRisk = ToolRisk.SAFE
    hitl_mode: HitlMode = HitlMode.NONE
    hitl_explicit: bool = False
    output_schema: JsonObject | None = None
    parameters_model: type[BaseModel] | None = None
    function: FunctionInfo | None = None
    schema_warnings: tuple[str, ...] = ()
    preflight: Callable[..., object] | None = None


class ToolChanges(TypedDict, total=False):
    """The fields ``Tool.replace`` may change."""

    name: str
    description: str
    parameters: Mapping[str, object]
    callable: Callable[..., object] | None
    metadata: ToolMetadata
    namespace: str | None
    method_name: str | None
    risk: ToolRisk | str
    hitl_mode: HitlMode | str
    preflight: Callable[..., object] | None


class ToolOptions(TypedDict, total=False):
    """What ``Tool(name=..., ...)`` takes besides the name."""

    description: str
    parameters: Mapping[str, object] | None
    callable: Callable[..., object] | None
    metadata: ToolMetadata | None
    namespace: str | None
    method_name: str | None
    risk: ToolRisk | str | None
    hitl_mode: HitlMode | str | None
    is_async: bool | None
    """Whether the callable is a coroutine function (detected when not given)."""
    output_schema: Mapping[str, object] | None
    parameters_model: type[BaseModel] | None
    input_schema: Mapping[str, object] | None
    """Another name for ``parameters``."""
    preflight: Callable[..., object] | None
    """The tool's pre-flight check (``ToolDefinition.preflight``)."""


FIELDS = ("name", "description", "parameters", "callable", "metadata", "namespace",
          "method_name", "risk", "hitl_mode", "hitl_explicit", "schema_warnings")
"""The definition's fields a ``Tool`` shows as its own attributes."""

_T = TypeVar("_T")


class HasDefinition(Protocol):
    """What holds a definition: a ``Tool``."""

    @property
    def definition(self) -> ToolDefinition: ...


class Defined(Generic[_T]):
    """A definition field read through the tool: on a tool, its value in ``tool.definition``;
    on the class, the default the class declares (``risk = ToolRisk.HIGH`` in a ``BaseTool``
    subclass). Writing one is refused: a tool is frozen."""

    __slots__ = ("default", "field")

    def __init__(self, field: str, default: _T) -> None:
        self.field = field
        self.default = default

    @overload
    def __get__(self, tool: None, owner: type[object]) -> _T: ...
    @overload
    def __get__(self, tool: HasDefinition, owner: type[object] | None = None) -> _T: ...

    def __get__(self, tool: HasDefinition | None, owner: type[object] | None = None) -> _T:
        if tool is None:
            return self.default
        value: _T = getattr(tool.definition, self.field)
        return value

    def __set__(self, tool: HasDefinition, value: object) -> None:
        raise UsageError(f"tool '{tool.definition.name}' is frozen: use "
                         f"tool.replace({self.field}=...) to derive a changed copy")


def shown(field: str) -> property:
    """A definition field read through the tool, for the fields a class does not give defaults
    (a C-level read: the door reads a tool's fields on every call); writing it is refused."""
    def refuse(tool: HasDefinition, value: object) -> None:
        Defined(field, None).__set__(tool, value)

    return property(attrgetter(f"_definition.{field}"), refuse)


@dataclass(frozen=True, slots=True)
class Defaults:
    """What a tool class declares for the tools it makes (``BaseTool`` subclasses set ``risk``
    and ``hitl_mode`` as class attributes); ``hitl_mode`` ``None``: the default for the risk."""

    risk: ToolRisk = ToolRisk.SAFE
    hitl_mode: HitlMode | None = None


def define(name: str | None, defaults: Defaults = Defaults(),
           **options: Unpack[ToolOptions]) -> ToolDefinition:
    """A definition from a raw JSON Schema and a callable (what ``Tool(name=..., ...)`` takes).

    The schema is repaired where it has one clear meaning (``normalize_schema``); what is left
    is kept in ``schema_warnings`` and warned about.

    Raises:
        UsageError: for a name that is not a non-empty string.
    """
    if not isinstance(name, str) or not name.strip():
        raise UsageError(f"a tool needs a non-empty string name, got {name!r}")
    func = options.get("callable")
    schema = options.get("parameters")
    if schema is None:
        schema = options.get("input_schema")
    fixed, problems = normalize_schema(schema, where=f"tool '{name}' parameters",
                                       stacklevel=_NORMALIZE_STACK)
    detected = is_async_callable(func) if func is not None else False
    output = options.get("output_schema")
    return _resolved(
        defaults, options.get("risk"), options.get("hitl_mode"),
        name=name, description=options.get("description") or "", parameters=fixed,
        callable=func, metadata=_metadata(options.get("metadata"),
                                          detected or bool(options.get("is_async"))),
        namespace=options.get("namespace"), method_name=options.get("method_name"),
        output_schema=_json(output), parameters_model=options.get("parameters_model"),
        schema_warnings=tuple(problems), preflight=options.get("preflight"))


def define_function(
    info: FunctionInfo, func: Callable[..., object], defaults: Defaults = Defaults(), *,
    namespace: str | None = None, method_name: str | None = None,
    description: str | None = None, metadata: ToolMetadata | None = None,
    risk: ToolRisk | str | None = None, hitl_mode: HitlMode | str | None = None,
    output_schema: Mapping[str, object] | None = None,
    preflight: Callable[..., object] | None = None,
) -> ToolDefinition:
    """A definition from what ``inspect_function`` learnt of ``func``: its name (qualified by
    ``namespace``), description and parameters."""
    ns = normalize_tool_name(namespace) if namespace else None
    method = method_name or info.func_name
    return _resolved(
        defaults, risk, hitl_mode,
        name=qualify(ns, method) if ns else info.func_name,
        description=info.description if description is None else description,
        parameters=info.parameters, callable=func,
        metadata=_metadata(metadata, is_async_callable(func)), namespace=ns, method_name=method,
        output_schema=_json(output_schema), function=info, preflight=preflight)


def derive(definition: ToolDefinition, **changes: Unpack[ToolChanges]) -> ToolDefinition:
    """``definition`` with some fields changed: new parameters are repaired as ``define``
    repairs them (and no longer come from the function's signature); a new risk brings its
    default HITL mode unless a mode was chosen."""
    unknown = set(changes) - set(ToolChanges.__annotations__)
    if unknown:
        raise UsageError(f"replace() got unknown field(s) {sorted(unknown)}")
    derived = replace(
        definition, name=changes.get("name", definition.name),
        description=changes.get("description", definition.description),
        callable=changes.get("callable", definition.callable),
        metadata=changes.get("metadata", definition.metadata),
        namespace=changes.get("namespace", definition.namespace),
        method_name=changes.get("method_name", definition.method_name),
        preflight=changes.get("preflight", definition.preflight))
    if "parameters" in changes:
        fixed, problems = normalize_schema(changes["parameters"], where=f"tool '{derived.name}'",
                                           stacklevel=_NORMALIZE_STACK)
        derived = replace(derived, parameters=fixed, schema_warnings=tuple(problems),
                          function=None)
    if "hitl_mode" in changes:
        derived = replace(derived, hitl_mode=HitlMode(changes["hitl_mode"]), hitl_explicit=True)
    if "risk" in changes:
        risk = ToolRisk(changes["risk"])
        mode = derived.hitl_mode if derived.hitl_explicit else default_hitl_mode(risk)
        derived = replace(derived, risk=risk, hitl_mode=mode)
    return derived


def _resolved(defaults: Defaults, risk: ToolRisk | str | None, hitl_mode: HitlMode | str | None,
              **fields: Unpack[_Fields]) -> ToolDefinition:
    """The definition with its rung of the risk ladder and its HITL mode worked out: each given
    one, else the class's, else (for the mode) the default for the risk."""
    rung = ToolRisk(risk) if risk is not None else defaults.risk
    chosen = hitl_mode if hitl_mode is not None else defaults.hitl_mode
    mode = HitlMode(chosen) if chosen is not None else default_hitl_mode(rung)
    return ToolDefinition(risk=rung, hitl_mode=mode, hitl_explicit=chosen is not None, **fields)


class _Fields(TypedDict, total=False):
    name: str
    description: str
    parameters: JsonObject
    callable: Callable[..., object] | None
    metadata: ToolMetadata
    namespace: str | None
    method_name: str | None
    output_schema: JsonObject | None
    parameters_model: type[BaseModel] | None
    function: FunctionInfo | None
    schema_warnings: tuple[str, ...]
    preflight: Callable[..., object] | None


def _json(schema: Mapping[str, object] | None) -> JsonObject | None:
    """A copy of a JSON Schema given as a mapping (its values are JSON: it came as a schema)."""
    return cast(JsonObject, dict(schema)) if schema is not None else None


def _metadata(metadata: ToolMetadata | None, is_async: bool) -> ToolMetadata:
    if metadata is None:
        return _ASYNC_METADATA if is_async else DEFAULT_METADATA
    if metadata.is_async == is_async:
        return metadata
    return metadata.model_copy(update={"is_async": is_async})
