"""The tool spec — what a provider is shown of a function tool — and the protocol every kind of
tool meets.

``ToolSpec`` is frozen and compared by identity: the formats cache each declaration on the spec
object, and a tool that changes (a new namespace, new descriptions) gets a new spec.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from .json import JsonObject
from .metadata import ToolMetadata
from .risk import HitlMode, ToolRisk

if TYPE_CHECKING:
    from .call import ToolCall
    from .context import ToolContext
    from .results import ToolResult

__all__ = ["DeclaresCallTypes", "HandlesCalls", "ToolKind", "ToolLike", "ToolSpec"]

ToolKind = Literal["function", "hosted", "provider"]
"""``function``: toolkeeper runs it; ``hosted``: the provider declares and runs it;
``provider``: the provider declares it and the application runs it (``handle_call``)."""


@dataclass(frozen=True, kw_only=True, eq=False)
class ToolSpec:
    """A function tool as the wire formats see it.

    Attributes:
        name: The tool's name (before any wire-safe renaming).
        description: What the model reads to choose the tool.
        parameters: JSON Schema of the arguments (an object schema).
        output_schema: JSON Schema of the structured result, when known (worked out on first
            read: most exports never need it).
        metadata: Hints, tags, timeouts, MCP annotations.
        namespace: The namespace, if any.
        method_name: The name without the namespace.
        qualified_name: ``{namespace}-{method_name}`` or the name.
        risk: The risk ladder's rung.
        hitl_mode: How approval is asked for.
    """

    name: str
    description: str
    parameters: JsonObject
    output: Callable[[], JsonObject | None] = field(repr=False)
    metadata: ToolMetadata
    namespace: str | None
    method_name: str | None
    qualified_name: str
    risk: ToolRisk
    hitl_mode: HitlMode
    declared: dict[Hashable, tuple[JsonObject, Sequence[object]]] = field(
        default_factory=dict, repr=False)
    """The formats' cache of this spec's declarations (format key → (declaration,
    problems)): filled by the formats, it lives and dies with the spec."""
    wire_arguments: dict[str, object] = field(default_factory=dict, repr=False)
    """Format → how the arguments a provider could not take by name were renamed (filled by
    the formats when they declare the spec; read to map a call's arguments back)."""

    @cached_property
    def output_schema(self) -> JsonObject | None:
        return self.output()

    @classmethod
    def trusted(cls, **values: object) -> ToolSpec:
        """A spec from values a ``Tool`` has already checked, without the frozen dataclass's
        field-by-field ``__init__`` (it runs once per tool, on its first export)."""
        spec = object.__new__(cls)
        spec.__dict__.update(values, declared={}, wire_arguments={})
        return spec


@runtime_checkable
class ToolLike(Protocol):
    """What every kind of tool has, declared: what the catalog, the door and its gates read of a
    tool. ``Tool`` (and ``BaseTool``, ``ToolChainTool``), ``HostedTool`` and
    ``ProviderDefinedTool`` all meet it; function tools also have a ``spec``."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def namespace(self) -> str | None: ...
    @property
    def qualified_name(self) -> str:
        """The catalog's key: ``{namespace}-{method_name}`` or the name."""
        ...
    @property
    def kind(self) -> ToolKind: ...
    @property
    def risk(self) -> ToolRisk: ...
    @property
    def hitl_mode(self) -> HitlMode: ...
    @property
    def hitl_explicit(self) -> bool:
        """Whether the HITL mode was chosen (and so asks by itself) rather than only inherited
        from the risk (which says *how* to ask, not *whether*)."""
        ...
    @property
    def metadata(self) -> ToolMetadata: ...
    @property
    def runs_scripts(self) -> bool:
        """Whether it runs code-mode scripts (a script may not call it)."""
        ...

    def get_schema(self, api_format: str = ...) -> JsonObject: ...


@runtime_checkable
class HandlesCalls(ToolLike, Protocol):
    """A tool the provider declares and the application runs (``ProviderDefinedTool``): the
    executor hands it the call as it came."""

    async def handle_call(self, call: ToolCall, ctx: ToolContext | None) -> ToolResult: ...


@runtime_checkable
class DeclaresCallTypes(Protocol):
    """A provider-defined tool's ``call_types``: the provider's item types that are calls of it
    (``computer_call``, ``apply_patch_call``…), which a response is parsed for."""

    @property
    def call_types(self) -> tuple[str, ...]: ...
