"""``CatalogBase``: the read side shared by ``Toolbox`` and every view; ``View``: a catalog seen
through a lens.

A catalog answers five primitive questions — its entries, one entry by name, which base tool a
name reaches, a keyed search, and the error for an unknown name — and everything else (listing,
browsing, schemas, export, search hits, direct execution, views) is derived here once.

Every view method is an ordinary method here: the lenses it builds on (``views.py``,
``deferred.py``) and the description catalogs of ``toolkeeper.i18n`` import nothing of this
module, so it imports them. Nothing is registered on the catalog by another module.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.call import ToolCall
from ..core.json import JsonObject
from ..core.results import ToolResult
from ..core.risk import ToolRisk
from ..core.spec import ToolLike
from ..errors import UnknownToolError, UsageError
from ..formats import WireExport, export
from ..i18n.catalog import DescriptionCatalog
from ..tools.tool import Tool
from .categories import BUILTIN_CATEGORIES, CategoryNode, CategoryTree
from .deferred import ToolSearchLens
from .door import Door, door_for
from .entry import CatalogEntry, entry_doc
from .search import SearchHit, SearchIndex
from .views import FilterLens, Lens, LocaleLens, RenameLens, SkillLens

if TYPE_CHECKING:
    from ..invoke.session import InvokerSession
    from ..skills.skill import Skill

__all__ = ["CatalogBase", "DeferredView", "FilteredView", "LocalizedView", "RenamedView",
           "SkillView", "View"]


class CatalogBase:
    """What every catalog (a ``Toolbox`` or a view over one) can do."""

    # -- primitives (implemented by Toolbox and by each view) ----------------------------

    def entries(self, *, include_disabled: bool = False) -> list[CatalogEntry]:
        raise NotImplementedError

    def entry(self, name: str) -> CatalogEntry | None:
        raise NotImplementedError

    def resolve(self, name: str) -> str | None:
        """The base toolbox key a shown name reaches, or ``None`` if it reaches nothing."""
        raise NotImplementedError

    def search_keys(
        self, query: str, *, limit: int, allowed: Callable[[str], bool] | None = None
    ) -> list[tuple[str, float, dict[str, float]]]:
        raise NotImplementedError

    def unknown(self, name: str) -> UnknownToolError:
        raise NotImplementedError

    # -- listing -------------------------------------------------------------------------

    def all(self) -> list[ToolLike]:
        """The enabled tools, in order."""
        return [e.tool for e in self.entries()]

    def names(self) -> list[str]:
        return [e.name for e in self.entries()]

    def get(self, name: str) -> ToolLike | None:
        """The enabled tool with this name (or alias), or ``None``."""
        entry = self.entry(name)
        return entry.tool if entry is not None and entry.enabled else None

    def get_tool(self, name_or_alias: str) -> ToolLike | None:
        """``get`` under the name a capability registry uses; a second name, kept for good: a
        name of the public contract that programs written for it use."""
        return self.get(name_or_alias)

    def lookup(self, name: str) -> ToolLike:
        """Like ``get`` but raises ``UnknownToolError`` listing the closest names."""
        tool = self.get(name)
        if tool is None:
            raise self.unknown(name)
        return tool

    def by_risk(self, risk: ToolRisk | str) -> list[ToolLike]:
        """The enabled tools at exactly this risk level."""
        wanted = ToolRisk(risk)
        return [e.tool for e in self.entries() if e.risk is wanted]

    def browse(self, category: str) -> list[ToolLike]:
        """The enabled tools in a category and its subcategories."""
        return [e.tool for e in self.entries() if CategoryTree.contains(category, e.category)]

    def category_tree(self, root: str = "") -> CategoryNode:
        """The categories (the built-in ones and every one in use) as a tree of
        ``CategoryNode``s from ``root``, each naming the enabled tools filed directly in it."""
        entries = self.entries()
        tree = CategoryTree([*BUILTIN_CATEGORIES, *(e.category for e in entries if e.category)])
        filed: dict[str, list[str]] = {}
        for e in entries:
            if e.category:
                filed.setdefault(e.category, []).append(e.name)
        return tree.node(root, filed)

    def explain(self) -> list[CatalogEntry]:
        """Every entry, enabled or not, with the reason it is in its state."""
        return self.entries(include_disabled=True)

    def search(self, query: str, limit: int = 5) -> list[SearchHit]:
        """Rank the enabled tools for a natural-language query (BM25, fuzzy names, boosts)."""
        hits = []
        for key, score, signals in self.search_keys(query, limit=limit):
            entry = self.entry(key)
            if entry is not None:
                hits.append(SearchHit(name=key, tool=entry.tool, score=score, signals=signals,
                                      tags=entry.tags, category=entry.category, kind=entry.kind))
        return hits

    # -- wire formats --------------------------------------------------------------------

    def offered(self) -> list[ToolLike]:
        """The tools a model is shown up front: enabled and not deferred."""
        return [e.tool for e in self.entries() if not e.deferred]

    def schemas(self, api_format: str = "openai-chat", *, strict: bool = False
                ) -> list[JsonObject]:
        """Declarations of the offered tools (deferred tools are left out)."""
        return self.export(api_format, strict=strict).declarations

    def export(self, api_format: str = "openai-chat", *, strict: bool = False) -> WireExport:
        """The offered tools in one wire format, with the name table to read calls back."""
        return export(self.offered(), api_format, strict=strict)

    def schema_for(self, name: str, api_format: str = "openai-chat", *, strict: bool = False
                   ) -> JsonObject:
        """The declaration of one tool, deferred or not."""
        tool = self.lookup(name)
        if isinstance(tool, Tool):
            return tool.get_schema(api_format, strict=strict)
        return tool.get_schema(api_format)

    def deferred_schemas(self, api_format: str = "openai-chat") -> list[JsonObject]:
        """Declarations of the deferred tools (for providers that defer natively)."""
        return [e.tool.get_schema(api_format) for e in self.entries() if e.deferred]

    # -- direct execution (a developer's convenience, not the governed door) ------------

    def execute_tool(self, name: str, **arguments: object) -> object:
        """Validate and call one tool directly; returns its raw value, raising on failure."""
        tool = self.lookup(name)
        if not isinstance(tool, Tool):
            raise UsageError(f"tool '{name}' is a {tool.kind} tool: the provider runs it (or "
                             "handles its call), so it cannot be executed directly")
        return tool.run_raw(arguments)

    def execute_tool_calls(
        self, calls: Sequence[ToolCall] | object, api_format: str | None = None, *,
        invoker: Door | None = None, session: InvokerSession | None = None,
    ) -> list[ToolResult] | list[JsonObject]:
        """Run model-originated calls through the invoker (the one door) and return the results.

        Given ``ToolCall``s, returns ``ToolResult``s in call order. Given a provider response (or
        its list of call dicts) and its ``api_format``, parses it with this catalog's names and
        returns the provider's tool-result messages, ready to append to the conversation.
        Concurrency-safe tools run at once, others one after another. Without ``invoker``, a
        default one is used with no approval handler: SAFE and SENSITIVE calls run, HIGH and
        CRITICAL ones are denied. (The same as ``ToolInvoker.execute_tool_calls``; the default
        door is built through ``toolbox/door.py``: the catalog never imports the door.)

        Raises:
            UsageError: provider call dicts (or anything else but ``ToolCall``s) without
                ``api_format``; the message names the item and the fix.
        """
        door = invoker if invoker is not None else door_for(self)
        return door.execute_tool_calls(calls, api_format, session=session, catalog=self)

    # -- views ---------------------------------------------------------------------------

    def filtered(
        self, *, tags: Iterable[str] | None = None, names: Iterable[str] | None = None,
        max_risk: ToolRisk | str | None = None, categories: Iterable[str] | None = None,
        predicate: Callable[[CatalogEntry], bool] | None = None,
    ) -> FilteredView:
        """A view showing only the matching tools."""
        return FilteredView(self, tags=tags, names=names, max_risk=max_risk,
                            categories=categories, predicate=predicate)

    def prefixed(self, prefix: str, *, sep: str = "_") -> RenamedView:
        """A view where every name is ``prefix + sep + name``."""
        return RenamedView(self, prefix=prefix, sep=sep)

    def renamed(self, mapping: dict[str, str]) -> RenamedView:
        """A view with some tools shown under other names."""
        return RenamedView(self, mapping)

    def localized(
        self, locale: str | None = None, *, workspace: str | Path | None = None,
        catalog: DescriptionCatalog | None = None,
    ) -> LocalizedView:
        """A view with descriptions in a locale (see ``toolkeeper.i18n``)."""
        return LocalizedView(self, locale, workspace=workspace, catalog=catalog)

    def with_skill(self, skill: Skill) -> SkillView:
        """A view restricted to a skill's allowed tools; other calls are refused naming it."""
        return SkillView(self, skill)

    def with_tool_search(self, *, limit: int = 5) -> DeferredView:
        """A view that hides deferred tools behind a ``tool_search`` meta-tool."""
        return DeferredView(self, limit=limit)


class View(CatalogBase):
    """A catalog seen through a ``Lens``: names mapped both ways, entries shown as the lens
    says. The inner catalog may be a ``Toolbox`` or another view."""

    def __init__(self, inner: CatalogBase, lens: Lens | None = None) -> None:
        self.inner = inner
        self.lens = lens if lens is not None else Lens()
        self._copies: dict[tuple[int, str], tuple[Tool, Tool]] = {}
        self._index: SearchIndex | None = None
        self._indexed: dict[str, int] = {}

    @property
    def instructions(self) -> str:
        """What to append to the system prompt while this view is in use (its lens's)."""
        return self.lens.instructions

    def _shown(self, entry: CatalogEntry) -> CatalogEntry | None:
        outer = self.lens.to_outer(entry.name)
        if outer is None:
            return None
        shown = self.lens.show(entry)
        if shown is None or outer == shown.name:
            return shown
        return replace(shown, name=outer, tool=self._renamed(shown.tool, outer))

    def _renamed(self, tool: ToolLike, outer: str) -> ToolLike:
        if not isinstance(tool, Tool):
            return tool  # provider tools keep the names their providers gave them
        key = (id(tool), outer)
        copy = self._copies.get(key)
        if copy is None or copy[0] is not tool:
            copy = (tool, tool.replace(name=outer, namespace=None, method_name=None))
            self._copies[key] = copy
        return copy[1]

    def _added(self, name: str) -> CatalogEntry | None:
        return next((e for e in self.lens.added() if e.name == name), None)

    def entries(self, *, include_disabled: bool = False) -> list[CatalogEntry]:
        shown = (self._shown(e) for e in self.inner.entries(include_disabled=include_disabled))
        return [*self.lens.added(), *(e for e in shown if e is not None)]

    def entry(self, name: str) -> CatalogEntry | None:
        added = self._added(name)
        if added is not None:
            return added
        inner_name = self.lens.to_inner(name)
        found = self.inner.entry(inner_name) if inner_name is not None else None
        shown = self._shown(found) if found is not None else None
        return shown if shown is not None and shown.name == name else None

    def resolve(self, name: str) -> str | None:
        if self._added(name) is not None:
            return name
        shown = self.entry(name)
        inner_name = self.lens.to_inner(name)
        if shown is None or not shown.enabled or inner_name is None:
            return None
        return self.inner.resolve(inner_name)

    def search_keys(
        self, query: str, *, limit: int, allowed: Callable[[str], bool] | None = None
    ) -> list[tuple[str, float, dict[str, float]]]:
        if self.lens.rewords:
            return self._own_index().search(query, limit=limit, allowed=allowed)

        def visible(inner_key: str) -> bool:
            found = self.inner.entry(inner_key)
            shown = self._shown(found) if found is not None else None
            return shown is not None and (allowed is None or allowed(shown.name))

        results = self.inner.search_keys(query, limit=limit, allowed=visible)
        return [(outer, score, signals) for key, score, signals in results
                if (outer := self.lens.to_outer(key)) is not None]

    def _own_index(self) -> SearchIndex:
        """An index of the entries as shown, kept in step with the inner catalog."""
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

    def unknown(self, name: str) -> UnknownToolError:
        refused = self.lens.refusal(name, self.inner)
        if refused is not None:
            return refused
        close = difflib.get_close_matches(name, self.names(), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        return UnknownToolError(f"unknown tool '{name}'{hint}", tool_name=name,
                                details={"close": close})


# The views the catalog's methods build, by the names they have always had.

class FilteredView(View):
    """Shows only tools matching every given condition (tags: any of them)."""

    def __init__(
        self, inner: CatalogBase, *, tags: Iterable[str] | None = None,
        names: Iterable[str] | None = None, max_risk: ToolRisk | str | None = None,
        categories: Iterable[str] | None = None,
        predicate: Callable[[CatalogEntry], bool] | None = None,
    ) -> None:
        super().__init__(inner, FilterLens(tags=tags, names=names, max_risk=max_risk,
                                           categories=categories, predicate=predicate))


class RenamedView(View):
    """Shows tools under other names: an explicit mapping, or a prefix for every name."""

    def __init__(self, inner: CatalogBase, mapping: dict[str, str] | None = None, *,
                 prefix: str | None = None, sep: str = "_") -> None:
        super().__init__(inner, RenameLens(mapping, prefix=prefix, sep=sep))

    @classmethod
    def with_prefix(cls, inner: CatalogBase, prefix: str, *, sep: str = "_") -> RenamedView:
        """``RenamedView(inner, prefix=prefix, sep=sep)``, the earlier way to build one; a
        compatibility alias that goes away in 0.3.0 (or use ``catalog.prefixed(prefix)``)."""
        return cls(inner, prefix=prefix, sep=sep)


class LocalizedView(View):
    """Shows each tool with its localized descriptions, searchable in that locale."""

    def __init__(
        self, inner: CatalogBase, locale: str | None = None, *,
        workspace: str | Path | None = None, catalog: DescriptionCatalog | None = None,
    ) -> None:
        self.catalog = catalog or DescriptionCatalog(locale, workspace=workspace)
        self.locale = self.catalog.locale
        super().__init__(inner, LocaleLens(self.catalog))


class SkillView(View):
    """Only the skill's allowed tools; a call to any other is refused naming the skill."""

    def __init__(self, inner: CatalogBase, skill: Skill) -> None:
        self.skill = skill
        super().__init__(inner, SkillLens(skill))


class DeferredView(View):
    """Hides unloaded deferred tools behind a ``tool_search`` tool that loads what it finds."""

    lens: ToolSearchLens

    def __init__(self, inner: CatalogBase, *, limit: int = 5,
                 api_format: str = "openai-chat") -> None:
        super().__init__(inner, ToolSearchLens(inner, limit=limit, api_format=api_format))

    @property
    def loaded(self) -> set[str]:
        """The deferred tools ``tool_search`` has found (callable and offered from then on)."""
        return self.lens.loaded
