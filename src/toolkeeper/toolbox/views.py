"""Views: a catalog seen through a lens that changes what it shows, never the tools.

A view wraps any catalog (a ``Toolbox`` or another view) and maps names both ways: ``to_outer``
names an inner entry as shown (``None`` hides it), ``to_inner`` finds the inner name behind a
shown one. Views compose, and for any stack a shown name reaches the tool that was shown.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from ..core.risk import ToolRisk
from ..errors import UnknownToolError
from ..tools.tool import Tool
from .catalog import CatalogBase, register_view
from .categories import CategoryTree
from .entry import CatalogEntry

__all__ = ["FilteredView", "RenamedView", "View"]


class View(CatalogBase):
    """Base of all views: identity names, every entry shown as it is."""

    def __init__(self, inner: CatalogBase) -> None:
        self.inner = inner
        self._copies: dict[tuple[int, str], Any] = {}

    # -- the lens (override in subclasses) ----------------------------------------------

    def to_outer(self, name: str) -> str | None:
        return name

    def to_inner(self, name: str) -> str | None:
        return name

    def show(self, entry: CatalogEntry) -> CatalogEntry | None:
        """The entry as this view shows it, or ``None`` to hide it."""
        return entry

    # -- the catalog primitives -----------------------------------------------------------

    def _shown(self, entry: CatalogEntry) -> CatalogEntry | None:
        outer = self.to_outer(entry.name)
        if outer is None:
            return None
        shown = self.show(entry)
        if shown is None or outer == shown.name:
            return shown
        return replace(shown, name=outer, tool=self._renamed(shown.tool, outer))

    def _renamed(self, tool: Any, outer: str) -> Any:
        if not isinstance(tool, Tool):
            return tool  # provider tools keep the names their providers gave them
        key = (id(tool), outer)
        copy = self._copies.get(key)
        if copy is None or copy[0] is not tool:
            copy = (tool, tool.replace(name=outer, namespace=None, method_name=None))
            self._copies[key] = copy
        return copy[1]

    def entries(self, *, include_disabled: bool = False) -> list[CatalogEntry]:
        shown = (self._shown(e) for e in self.inner.entries(include_disabled=include_disabled))
        return [e for e in shown if e is not None]

    def entry(self, name: str) -> CatalogEntry | None:
        inner_name = self.to_inner(name)
        if inner_name is None:
            return None
        found = self.inner.entry(inner_name)
        if found is None:
            return None
        shown = self._shown(found)
        return shown if shown is not None and shown.name == name else None

    def resolve(self, name: str) -> str | None:
        shown = self.entry(name)
        inner_name = self.to_inner(name)
        if shown is None or not shown.enabled or inner_name is None:
            return None
        return self.inner.resolve(inner_name)

    def search_keys(
        self, query: str, *, limit: int, allowed: Callable[[str], bool] | None = None
    ) -> list[tuple[str, float, dict[str, float]]]:
        def visible(inner_key: str) -> bool:
            found = self.inner.entry(inner_key)
            shown = self._shown(found) if found is not None else None
            return shown is not None and (allowed is None or allowed(shown.name))

        results = self.inner.search_keys(query, limit=limit, allowed=visible)
        out = []
        for key, score, signals in results:
            outer = self.to_outer(key)
            if outer is not None:
                out.append((outer, score, signals))
        return out

    def unknown(self, name: str) -> UnknownToolError:
        close = difflib.get_close_matches(name, self.names(), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        return UnknownToolError(f"unknown tool '{name}'{hint}", tool_name=name,
                                details={"close": close})


class FilteredView(View):
    """Shows only tools matching every given condition (tags: any of them)."""

    def __init__(
        self, inner: CatalogBase, *, tags: Iterable[str] | None = None,
        names: Iterable[str] | None = None, max_risk: ToolRisk | str | None = None,
        categories: Iterable[str] | None = None,
        predicate: Callable[[CatalogEntry], bool] | None = None,
    ) -> None:
        super().__init__(inner)
        self.tags = frozenset(tags) if tags is not None else None
        self.names_allowed = frozenset(names) if names is not None else None
        self.max_risk = ToolRisk(max_risk) if max_risk is not None else None
        self.categories = tuple(categories) if categories is not None else None
        self.predicate = predicate

    def show(self, entry: CatalogEntry) -> CatalogEntry | None:
        if self.tags is not None and not self.tags & entry.tags:
            return None
        if self.names_allowed is not None and not (
            {entry.name, entry.tool.name, *entry.aliases} & self.names_allowed
        ):
            return None
        if self.max_risk is not None and entry.risk > self.max_risk:
            return None
        if self.categories is not None and not any(
            CategoryTree.contains(c, entry.category) for c in self.categories
        ):
            return None
        if self.predicate is not None and not self.predicate(entry):
            return None
        return entry


class RenamedView(View):
    """Shows tools under other names: an explicit mapping, or a prefix for every name."""

    def __init__(self, inner: CatalogBase, mapping: dict[str, str]) -> None:
        super().__init__(inner)
        self._out = dict(mapping)
        self._in = {v: k for k, v in mapping.items()}
        if len(self._in) != len(self._out):
            raise ValueError("a rename mapping must not give two tools the same name")
        self._prefix: str | None = None

    @classmethod
    def with_prefix(cls, inner: CatalogBase, prefix: str, *, sep: str = "_") -> RenamedView:
        view = cls(inner, {})
        view._prefix = f"{prefix}{sep}"
        return view

    def to_outer(self, name: str) -> str | None:
        if self._prefix is not None:
            return self._prefix + name
        outer = self._out.get(name, name)
        if outer == name and name in self._in:
            return None  # another tool was renamed to this name; the mapping wins
        return outer

    def to_inner(self, name: str) -> str | None:
        if self._prefix is not None:
            return name[len(self._prefix):] if name.startswith(self._prefix) else None
        if name in self._in:
            return self._in[name]
        return None if name in self._out else name


register_view("filtered", FilteredView)
register_view("prefixed", RenamedView.with_prefix)
register_view("renamed", RenamedView)
