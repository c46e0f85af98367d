"""``Toolbox``: the catalog holding every kind of tool, keyed by qualified name."""

from __future__ import annotations

import difflib
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from types import ModuleType
from typing import Literal

from ..core.spec import ToolLike
from ..errors import UnknownToolError, UsageError
from ..tools.protocol import ProtocolTool, ToolProtocol
from ..tools.tool import Tool
from .catalog import CatalogBase
from .categories import CategoryTree
from .entry import CatalogEntry, ChangeEvent, ChangeKind, ToolConflictWarning, entry_doc
from .namespaces import add_class, add_module, add_toolbox
from .search import SearchIndex, SearchOptions

__all__ = ["CapabilityRegistry", "Toolbox", "as_toolbox"]

OnConflict = Literal["replace", "keep", "error"]
Listener = Callable[[ChangeEvent], None]


def _as_tool(obj: object) -> ToolLike:
    if isinstance(obj, Tool | ToolLike):
        return obj
    if isinstance(obj, ToolProtocol):  # an object with a tool's shape, used as it is
        return ProtocolTool(obj)
    if callable(obj) and not isinstance(obj, type):
        return Tool.from_function(obj)
    raise UsageError(f"cannot add {obj!r} to a toolbox: pass a Tool, a BaseTool instance, a "
                     "HostedTool/ProviderDefinedTool, an object with name, description, "
                     "input_schema and async execute(ctx, **kwargs), or a function")


def _key(tool: ToolLike) -> str:
    return tool.qualified_name or tool.name


class Toolbox(CatalogBase):
    """A name-keyed catalog of tools with categories, tags, aliases, search and change events.

    Adding a tool under a name that is taken replaces the old one (the last one added wins, as
    agent code that re-registers a tool expects) with a
    ``ToolConflictWarning`` naming both; pass ``on_conflict="keep"`` to keep the first or
    ``"error"`` to refuse. ``execute_tool`` and ``execute_tool_calls`` validate and call tools
    directly; they are a developer's convenience, not a governed door.
    """

    def __init__(
        self, tools: Iterable[object] = (), *, on_conflict: OnConflict = "replace",
        search: SearchOptions | None = None,
    ) -> None:
        self._entries: dict[str, CatalogEntry] = {}
        self._names: dict[str, str] = {}
        self._enabled: dict[str, ToolLike] = {}
        """Every name and alias of an enabled tool → the tool, kept in step with the entries:
        ``get`` is this dict's own ``get`` (measured at 10,000 tools with names drawn at random:
        the method through ``entry`` cost 568 ns per lookup, a dict's ``get`` 55 ns)."""
        self.get = self._enabled.get  # type: ignore[method-assign, assignment]
        self._lock = threading.RLock()
        self._listeners: list[Listener] = []
        self._index = SearchIndex(search)
        self.on_conflict: OnConflict = on_conflict
        self.categories = CategoryTree()
        self.version = 0
        for tool in tools:
            self.add(tool)

    # -- adding and removing -------------------------------------------------------------

    def add(
        self, tool: object, *, category: str | None = None, tags: Iterable[str] = (),
        aliases: Iterable[str] = (), namespace: str | None = None,
        on_conflict: OnConflict | None = None,
    ) -> ToolLike:
        """Add a tool (or a function, which becomes one); returns the tool as stored."""
        found = _as_tool(tool)
        if namespace and isinstance(found, Tool):
            found = found.with_namespace(namespace, force=True)
        metadata = found.metadata
        category = category or metadata.category
        entry = CatalogEntry(
            name=_key(found), tool=found,
            category=self.categories.add(category) if category else None,
            tags=frozenset(tags) | metadata.all_tags,
            aliases=tuple(dict.fromkeys([*aliases, *metadata.aliases])),
            deferred=metadata.defer_loading,
        )
        with self._lock:
            if not self._resolve_conflict(entry, on_conflict or self.on_conflict):
                return self._entries[entry.name].tool
            self._store(entry)
        self._emit("added", (entry.name,))
        return found

    def _resolve_conflict(self, entry: CatalogEntry, policy: OnConflict) -> bool:
        old = self._entries.get(entry.name)
        if old is None or old.tool is entry.tool:
            return True
        if policy == "error":
            raise UsageError(f"a tool named '{entry.name}' is already in the toolbox ({old.tool!r});"
                             " remove it first, add under a namespace, or pass on_conflict="
                             "'replace'")
        kept = "the new one replaces it" if policy == "replace" else "the first one is kept"
        warnings.warn(f"tool name '{entry.name}' is taken by {old.tool!r}; adding {entry.tool!r}: "
                      f"{kept}. Use namespace=... to keep both, or on_conflict='error' to refuse",
                      ToolConflictWarning, stacklevel=4)
        if policy == "replace":
            self._unstore(entry.name)
        return policy == "replace"

    def _store(self, entry: CatalogEntry) -> None:
        self._entries[entry.name] = entry
        for name in (entry.name, entry.tool.name, *entry.aliases):
            self._names.setdefault(name, entry.name)
        self._sync(entry)
        self._index.upsert(entry.name, entry_doc(entry))

    def _unstore(self, key: str) -> CatalogEntry:
        entry = self._entries.pop(key)
        self._names = {n: k for n, k in self._names.items() if k != key}
        self._sync(entry)
        self._index.remove(key)
        return entry

    def _sync(self, entry: CatalogEntry) -> None:
        """Bring the names an entry can be reached by up to date in the lookup table."""
        for name in (entry.name, entry.tool.name, *entry.aliases):
            key = self._names.get(name)
            current = self._entries.get(key) if key is not None else None
            if current is not None and current.enabled:
                self._enabled[name] = current.tool
            else:
                self._enabled.pop(name, None)

    def register(self, tool: object, namespace: str | None = None) -> ToolLike:
        """``add`` under the name the registry library uses; a second name,
        kept for good: a name of the public contract that programs written for it use."""
        return self.add(tool, namespace=namespace)

    def register_tool(
        self, tool: object, category: str | None = None, tags: Iterable[str] | None = None,
        aliases: Iterable[str] | None = None,
    ) -> ToolLike:
        """``add`` with a category, tags and aliases, under the name a capability registry
        uses; a second name, kept for good: a name of the public contract that programs written for it use."""
        return self.add(tool, category=category, tags=tags or (), aliases=aliases or ())

    def remove(self, name: str) -> ToolLike:
        """Remove a tool by name or alias; returns it.

        Raises:
            UnknownToolError: no such tool (with the closest names).
        """
        with self._lock:
            key = self._names.get(name)
            if key is None:
                raise self.unknown(name)
            entry = self._unstore(key)
        self._emit("removed", (key,))
        return entry.tool

    def add_module(self, module: ModuleType, namespace: str | None = None) -> list[str]:
        """Add a module's tools (or its public functions); returns the names added."""
        return add_module(self, module, namespace)

    def add_class(self, obj: object, namespace: str | None = None) -> list[str]:
        """Add a class's (or instance's) public methods under a namespace (the class name)."""
        return add_class(self, obj, namespace)

    def add_toolbox(self, other: CatalogBase, namespace: str | None = None) -> list[str]:
        """Add every tool of another toolbox or view, optionally under a namespace."""
        return add_toolbox(self, other, namespace)

    def merge(self, other: CatalogBase) -> list[str]:
        """Add every tool of another catalog under its own name."""
        return self.add_toolbox(other)

    def remove_namespace(self, namespace: str) -> list[str]:
        """Remove every tool of a namespace; returns their names."""
        keys = [k for k, e in self._entries.items() if e.tool.namespace == namespace]
        if not keys:
            raise UsageError(f"no tools in namespace '{namespace}'")
        for key in keys:
            self.remove(key)
        return keys

    # -- state ---------------------------------------------------------------------------

    def set_enabled(self, name: str, enabled: bool, reason: str | None = None) -> None:
        """Enable or disable one tool; the reason shows in ``explain``."""
        with self._lock:
            key = self._names.get(name)
            if key is None:
                raise self.unknown(name)
            self._entries[key] = replace(self._entries[key], enabled=enabled, reason=reason)
            self._sync(self._entries[key])
        self._emit("enabled" if enabled else "disabled", (key,), reason)

    def enable(self, name: str, reason: str | None = None) -> None:
        self.set_enabled(name, True, reason)

    def disable(self, name: str, reason: str | None = None) -> None:
        self.set_enabled(name, False, reason)

    def set_namespace_enabled(self, namespace: str, enabled: bool, reason: str | None = None) -> None:
        """Enable or disable every tool of a namespace."""
        with self._lock:
            keys = tuple(k for k, e in self._entries.items()
                         if e.tool.namespace == namespace)
            if not keys:
                raise UsageError(f"no tools in namespace '{namespace}'")
            for key in keys:
                self._entries[key] = replace(self._entries[key], enabled=enabled, reason=reason)
                self._sync(self._entries[key])
        self._emit("enabled" if enabled else "disabled", keys, reason)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` on every change; returns a function that unsubscribes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _emit(self, kind: ChangeKind, names: tuple[str, ...], reason: str | None = None) -> None:
        with self._lock:
            self.version += 1
            event = ChangeEvent(kind=kind, names=names, reason=reason, version=self.version)
        for listener in list(self._listeners):
            listener(event)

    # -- reading (the catalog protocol) --------------------------------------------------

    def entries(self, *, include_disabled: bool = False) -> list[CatalogEntry]:
        """Every entry (enabled only unless ``include_disabled``), in insertion order."""
        with self._lock:
            return [e for e in self._entries.values() if include_disabled or e.enabled]

    def entry(self, name: str) -> CatalogEntry | None:
        key = self._names.get(name)
        return self._entries.get(key) if key is not None else None

    def resolve(self, name: str) -> str | None:
        entry = self.entry(name)
        return entry.name if entry is not None and entry.enabled else None

    def search_keys(
        self, query: str, *, limit: int, allowed: Callable[[str], bool] | None = None
    ) -> list[tuple[str, float, dict[str, float]]]:
        def visible(key: str) -> bool:
            entry = self._entries.get(key)
            return entry is not None and entry.enabled and (allowed is None or allowed(key))

        return self._index.search(query, limit=limit, allowed=visible)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._names

    def __iter__(self) -> Iterator[ToolLike]:
        return iter(self.all())

    def unknown(self, name: str) -> UnknownToolError:
        close = difflib.get_close_matches(name, list(self._names), n=3, cutoff=0.6)
        close += [k for k, _, _ in self._index.search(name, limit=3, semantic=False)
                  if k not in close]
        close = close[:3]
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        return UnknownToolError(f"unknown tool '{name}'{hint}", tool_name=name,
                                details={"close": close})


CapabilityRegistry = Toolbox
"""The catalog under the name ``CapabilityRegistry`` programs use: ``register_tool``,
``get_tool``, ``search``, ``browse``, ``by_risk`` and ``category_tree`` are all ``Toolbox``'s.
A second name, kept for good: a name of the public contract that programs written for it use."""


def as_toolbox(tools: Toolbox | CatalogBase | Iterable[object]) -> CatalogBase:
    """A catalog from a toolbox, a view, or a plain list of tools."""
    if isinstance(tools, CatalogBase):
        return tools
    return Toolbox(tools)
