"""``LocalizedView``: a catalog with descriptions in one locale, searchable in that locale."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..toolbox.catalog import CatalogBase, register_view
from ..toolbox.entry import CatalogEntry, entry_doc
from ..toolbox.search import SearchIndex
from ..toolbox.views import View
from ..tools.tool import Tool
from .catalog import DescriptionCatalog

__all__ = ["LocalizedView"]


class LocalizedView(View):
    """Shows each tool with its localized description and parameter descriptions."""

    def __init__(
        self, inner: CatalogBase, locale: str | None = None, *,
        workspace: str | Path | None = None, catalog: DescriptionCatalog | None = None,
    ) -> None:
        super().__init__(inner)
        self.catalog = catalog or DescriptionCatalog(locale, workspace=workspace)
        self.locale = self.catalog.locale
        self._localized: dict[int, tuple[Any, Any]] = {}
        self._index: SearchIndex | None = None
        self._indexed: dict[str, int] = {}

    def show(self, entry: CatalogEntry) -> CatalogEntry | None:
        return replace(entry, tool=self._translate(entry.tool))

    def _translate(self, tool: Any) -> Any:
        if not isinstance(tool, Tool):
            return tool
        cached = self._localized.get(id(tool))
        if cached is not None and cached[0] is tool:
            return cached[1]
        base = tool.method_name or tool.name
        description = self.catalog.description(tool.name, self.catalog.description(base, ""))
        params = {
            name: text for name in (tool.parameters.get("properties") or {})
            if (text := self.catalog.parameter(tool.name, name,
                                               self.catalog.parameter(base, name)))
        }
        translated = tool.with_descriptions(description or None, params) if (
            description or params) else tool
        self._localized[id(tool)] = (tool, translated)
        return translated

    def search_keys(
        self, query: str, *, limit: int, allowed: Callable[[str], bool] | None = None
    ) -> list[tuple[str, float, dict[str, float]]]:
        index = self._sync_index()
        return index.search(query, limit=limit, allowed=allowed)

    def _sync_index(self) -> SearchIndex:
        if self._index is None:
            self._index = SearchIndex()
        current = {e.name: e for e in self.entries()}
        for key in set(self._indexed) - set(current):
            self._index.remove(key)
            del self._indexed[key]
        for key, entry in current.items():
            if self._indexed.get(key) != id(entry.tool):
                self._index.upsert(key, entry_doc(entry))
                self._indexed[key] = id(entry.tool)
        return self._index


register_view("localized", LocalizedView)
