"""What the catalog knows about one tool besides the tool itself, and how it reports changes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from ..core.risk import ToolRisk
from ..core.spec import ToolLike
from ..tools.hosted import is_hosted_tool, is_provider_defined_tool
from ..tools.tool import Tool
from .search import SearchDoc

__all__ = ["CapabilityEntry", "CatalogEntry", "ChangeEvent", "ChangeKind", "ToolConflictWarning",
           "entry_doc"]


class ToolConflictWarning(UserWarning):
    """Two tools claimed the same name; the message says which one the catalog kept."""


@dataclass(frozen=True, kw_only=True)
class CatalogEntry:
    """One tool in a catalog, with its catalog-level facts.

    Attributes:
        name: The key the catalog uses (the tool's qualified name).
        tool: The tool.
        category: Normalized category path, if any.
        tags: Catalog tags plus the tool's own tags.
        aliases: Other names that reach this tool.
        enabled: Whether the tool is offered and callable.
        reason: Why it is disabled (or why it was last enabled), if someone said.
        deferred: Left out of ``schemas()``; found through ``tool_search``.
    """

    name: str
    tool: ToolLike
    category: str | None = None
    tags: frozenset[str] = frozenset()
    aliases: tuple[str, ...] = ()
    enabled: bool = True
    reason: str | None = None
    deferred: bool = False

    @property
    def risk(self) -> ToolRisk:
        return self.tool.risk

    @property
    def description(self) -> str:
        return self.tool.description

    @property
    def kind(self) -> Literal["local", "hosted", "provider-defined"]:
        if is_provider_defined_tool(self.tool):
            return "provider-defined"
        return "hosted" if is_hosted_tool(self.tool) else "local"


@runtime_checkable
class CapabilityEntry(Protocol):
    """A capability entry, ``{name, description, kind, tags}`` (see docs/compat.md). Toolkeeper's
    ``SearchHit`` (what ``search`` returns) and ``CatalogEntry`` (what ``entries`` and ``entry``
    return) both carry these; ``isinstance(hit, CapabilityEntry)`` holds for each."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def kind(self) -> Literal["local", "hosted", "provider-defined"]: ...

    @property
    def tags(self) -> frozenset[str]: ...


ChangeKind = Literal["added", "removed", "enabled", "disabled", "updated"]


@dataclass(frozen=True, kw_only=True)
class ChangeEvent:
    """A change of a catalog: ``added``, ``removed``, ``enabled``, ``disabled`` or ``updated``."""

    kind: ChangeKind
    names: tuple[str, ...]
    reason: str | None = None
    version: int = 0
    details: dict[str, object] = field(default_factory=dict)


def entry_doc(entry: CatalogEntry, description: str | None = None) -> SearchDoc:
    """The searchable text of an entry (``description`` overrides, e.g. a localized one)."""
    tool = entry.tool
    function = tool if isinstance(tool, Tool) else None  # provider tools have no parameters
    parts: list[str] = []
    _param_words(function.parameters if function is not None else {}, parts, depth=0)
    hint = tool.metadata.search_hint
    text = description if description is not None else tool.description
    method = function.method_name if function is not None else None
    names = " ".join([entry.name, method or "", *entry.aliases])
    return SearchDoc(name=names, description=f"{text} {hint}".strip(), params=" ".join(parts),
                     tags=tuple(sorted(entry.tags)), category=entry.category)


def _param_words(schema: Mapping[str, object], parts: list[str], depth: int) -> None:
    """Parameter names, descriptions and string enum values, nested objects and array items
    included (two levels): what a request mentions about its arguments ("in fahrenheit")."""
    props = schema.get("properties")
    for name, sub in (props.items() if isinstance(props, dict) else ()):
        parts.append(str(name))
        if not isinstance(sub, dict):
            continue
        if isinstance(sub.get("description"), str):
            parts.append(sub["description"])
        for node in (sub, sub.get("items")):
            if isinstance(node, dict) and isinstance(node.get("enum"), list):
                parts.extend(v for v in node["enum"][:20] if isinstance(v, str))
        if depth < 1:
            for node in (sub, sub.get("items")):
                if isinstance(node, dict) and isinstance(node.get("properties"), dict):
                    _param_words(node, parts, depth + 1)
