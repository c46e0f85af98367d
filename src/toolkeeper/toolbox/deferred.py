"""Deferred loading: tools left out of the first tool list, found through ``tool_search``.

``ToolSearchLens`` (what ``with_tool_search()`` views through) shows the non-deferred tools plus
a ``tool_search`` meta-tool — an ordinary tool the model calls — that searches the deferred
ones, returns their declarations in the caller's wire format and makes them callable (and
offered) from then on. Where a provider defers natively (Anthropic's and OpenAI's tool search),
``native_deferred_tools`` exports that form.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import TYPE_CHECKING

from ..core.json import JsonObject
from ..core.metadata import ToolMetadata
from ..errors import UsageError
from ..formats import get_format
from ..tools.tool import Tool
from .entry import CatalogEntry
from .views import Lens

if TYPE_CHECKING:
    from .catalog import CatalogBase

__all__ = ["TOOL_SEARCH", "ToolSearchLens", "native_deferred_tools"]

TOOL_SEARCH = "tool_search"
_NATIVE_SEARCH = {
    "anthropic": {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"},
    "openai-responses": {"type": "tool_search"},
}


class ToolSearchLens(Lens):
    """Hides unloaded deferred tools behind a ``tool_search`` tool that loads what it finds."""

    def __init__(self, inner: CatalogBase, *, limit: int = 5,
                 api_format: str = "openai-chat") -> None:
        self.inner = inner
        self.limit = limit
        self.api_format = get_format(api_format).name
        self.loaded: set[str] = set()
        self._lock = threading.Lock()
        self.search_tool = Tool.from_function(
            self._tool_search, name=TOOL_SEARCH,
            metadata=ToolMetadata(tags=frozenset({"meta"}), read_only_hint=True),
        )
        self._entry = CatalogEntry(name=TOOL_SEARCH, tool=self.search_tool, category="system",
                                   tags=frozenset({"meta"}))

    def _tool_search(self, query: str, limit: int | None = None) -> JsonObject:
        """Search for more tools by what they do; the tools found become callable.

        Args:
            query: What you need a tool for, in plain words (e.g. "convert currency").
            limit: How many tools to return at most.
        """
        hits = self.inner.search_keys(query, limit=limit or self.limit, allowed=self._is_deferred)
        found = [key for key, _, _ in hits]
        with self._lock:
            self.loaded.update(found)
        tools = [self.inner.entry(key) for key in found]
        return {"tools": [e.tool.get_schema(self.api_format) for e in tools if e is not None],
                "note": "These tools can now be called." if found else "No matching tools."}

    def _is_deferred(self, key: str) -> bool:
        entry = self.inner.entry(key)
        return entry is not None and entry.deferred and key not in self.loaded

    def show(self, entry: CatalogEntry) -> CatalogEntry | None:
        if not entry.deferred:
            return entry
        return replace(entry, deferred=False) if entry.name in self.loaded else None

    def added(self) -> list[CatalogEntry]:
        return [self._entry]


def native_deferred_tools(catalog: CatalogBase, api_format: str) -> list[JsonObject]:
    """The ``tools=`` list for a provider that defers natively: every enabled tool, deferred
    ones marked ``defer_loading``, plus the provider's own tool-search tool.

    Raises:
        UsageError: the format has no native deferral (use ``with_tool_search()`` instead).
    """
    fmt = get_format(api_format)
    search = _NATIVE_SEARCH.get(fmt.name)
    if search is None:
        raise UsageError(f"{fmt.name} has no native tool search; use catalog.with_tool_search() "
                         f"(native in: {', '.join(_NATIVE_SEARCH)})")
    declarations = [e.tool.get_schema(fmt.name) for e in catalog.entries()]
    return [*declarations, dict(search)]

