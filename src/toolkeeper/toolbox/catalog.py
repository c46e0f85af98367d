"""``CatalogBase``: the read side shared by ``Toolbox`` and every view.

A catalog answers five primitive questions — its entries, one entry by name, which base tool a
name reaches, a keyed search, and the error for an unknown name — and everything else (listing,
browsing, schemas, export, search hits, direct execution) is derived here once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..core.call import ToolCall
from ..core.risk import ToolRisk
from ..errors import UnknownToolError, UsageError
from ..formats import WireExport, export
from .categories import CategoryTree
from .entry import CatalogEntry
from .search import SearchHit

if TYPE_CHECKING:
    from ..skills.skill import Skill

__all__ = ["CatalogBase", "register_call_side", "register_view"]

_T = TypeVar("_T")


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

    def all(self) -> list[Any]:
        """The enabled tools, in order."""
        return [e.tool for e in self.entries()]

    def names(self) -> list[str]:
        return [e.name for e in self.entries()]

    def get(self, name: str) -> Any | None:
        """The enabled tool with this name (or alias), or ``None``."""
        entry = self.entry(name)
        return entry.tool if entry is not None and entry.enabled else None

    def get_tool(self, name_or_alias: str) -> Any | None:
        """Seed 000's name for ``get``."""
        return self.get(name_or_alias)

    def lookup(self, name: str) -> Any:
        """Like ``get`` but raises ``UnknownToolError`` listing the closest names."""
        tool = self.get(name)
        if tool is None:
            raise self.unknown(name)
        return tool

    def by_risk(self, risk: ToolRisk | str) -> list[Any]:
        """The enabled tools at exactly this risk level."""
        wanted = ToolRisk(risk)
        return [e.tool for e in self.entries() if e.risk is wanted]

    def browse(self, category: str) -> list[Any]:
        """The enabled tools in a category and its subcategories."""
        return [e.tool for e in self.entries() if CategoryTree.contains(category, e.category)]

    def explain(self) -> list[CatalogEntry]:
        """Every entry, enabled or not, with the reason it is in its state."""
        return self.entries(include_disabled=True)

    def search(self, query: str, limit: int = 5) -> list[SearchHit]:
        """Rank the enabled tools for a natural-language query (BM25, fuzzy names, boosts)."""
        hits = []
        for key, score, signals in self.search_keys(query, limit=limit):
            entry = self.entry(key)
            if entry is not None:
                hits.append(SearchHit(name=key, tool=entry.tool, score=score, signals=signals))
        return hits

    # -- wire formats --------------------------------------------------------------------

    def offered(self) -> list[Any]:
        """The tools a model is shown up front: enabled and not deferred."""
        return [e.tool for e in self.entries() if not e.deferred]

    def schemas(self, api_format: str = "openai-chat", *, strict: bool = False) -> list[Any]:
        """Declarations of the offered tools (deferred tools are left out)."""
        return self.export(api_format, strict=strict).declarations

    def export(self, api_format: str = "openai-chat", *, strict: bool = False) -> WireExport:
        """The offered tools in one wire format, with the name table to read calls back."""
        return export(self.offered(), api_format, strict=strict)

    def schema_for(self, name: str, api_format: str = "openai-chat", *, strict: bool = False) -> Any:
        """The declaration of one tool, deferred or not."""
        tool = self.lookup(name)
        return tool.get_schema(api_format, strict=strict)

    def deferred_schemas(self, api_format: str = "openai-chat") -> list[Any]:
        """Declarations of the deferred tools (for providers that defer natively)."""
        return [e.tool.get_schema(api_format) for e in self.entries() if e.deferred]

    # -- direct execution (a developer's convenience, not the governed door) ------------

    def execute_tool(self, name: str, **arguments: Any) -> Any:
        """Validate and call one tool directly; returns its raw value, raising on failure."""
        return self.lookup(name).run_raw(arguments)

    def execute_tool_calls(
        self, calls: Sequence[ToolCall] | Any, api_format: str | None = None, *,
        invoker: Any = None, session: Any = None,
    ) -> list[Any]:
        """Run model-originated calls through the invoker (the one door) and return the results.

        Given ``ToolCall``s, returns ``ToolResult``s in call order. Given a provider response and
        its ``api_format``, parses it with this catalog's names and returns the provider's
        tool-result messages, ready to append to the conversation. Concurrency-safe tools run at
        once, others one after another. Without ``invoker``, a default one is used: no approval
        handler, so every call above SAFE is denied. (The call side — parse, invoke, render —
        lives in ``toolkeeper.invoke``, which registers itself here when imported.)
        """
        run = _registered(_CALL_SIDE, "execute_tool_calls", "toolkeeper.invoke")
        results: list[Any] = run(self, calls, api_format, invoker=invoker, session=session)
        return results

    # -- views ---------------------------------------------------------------------------

    def filtered(
        self, *, tags: Iterable[str] | None = None, names: Iterable[str] | None = None,
        max_risk: ToolRisk | str | None = None, categories: Iterable[str] | None = None,
        predicate: Callable[[CatalogEntry], bool] | None = None,
    ) -> CatalogBase:
        """A view showing only the matching tools."""
        return _registered(_VIEWS, "filtered", "toolkeeper.toolbox")(
            self, tags=tags, names=names, max_risk=max_risk, categories=categories,
            predicate=predicate)

    def prefixed(self, prefix: str, *, sep: str = "_") -> CatalogBase:
        """A view where every name is ``prefix + sep + name``."""
        return _registered(_VIEWS, "prefixed", "toolkeeper.toolbox")(self, prefix, sep=sep)

    def renamed(self, mapping: dict[str, str]) -> CatalogBase:
        """A view with some tools shown under other names."""
        return _registered(_VIEWS, "renamed", "toolkeeper.toolbox")(self, mapping)

    def localized(self, locale: str | None = None, **options: Any) -> CatalogBase:
        """A view with descriptions in a locale (see ``toolkeeper.i18n``)."""
        return _registered(_VIEWS, "localized", "toolkeeper.i18n")(self, locale, **options)

    def with_skill(self, skill: Skill) -> CatalogBase:
        """A view restricted to a skill's allowed tools; other calls are refused naming it."""
        return _registered(_VIEWS, "with_skill", "toolkeeper.skills")(self, skill)

    def with_tool_search(self, *, limit: int = 5) -> CatalogBase:
        """A view that hides deferred tools behind a ``tool_search`` meta-tool."""
        return _registered(_VIEWS, "with_tool_search", "toolkeeper.toolbox")(self, limit=limit)


# The rooms that wrap a catalog (views in toolbox/, i18n/, skills/) and the call side (invoke/)
# sit beside or above it, so the catalog never imports them: each registers what the methods
# above build when it is imported (importing ``toolkeeper`` imports them all).
_VIEWS: dict[str, Callable[..., CatalogBase]] = {}
_CALL_SIDE: dict[str, Callable[..., Any]] = {}


def register_view(method: str, factory: Callable[..., CatalogBase]) -> None:
    """Make ``CatalogBase.<method>(...)`` build ``factory(catalog, ...)``."""
    _VIEWS[method] = factory


def register_call_side(method: str, function: Callable[..., Any]) -> None:
    """Make ``CatalogBase.<method>(...)`` run ``function(catalog, ...)``."""
    _CALL_SIDE[method] = function


def _registered(table: dict[str, Callable[..., _T]], method: str, room: str
                ) -> Callable[..., _T]:
    found = table.get(method)
    if found is None:
        raise UsageError(f"{method}() is provided by {room}, which is not loaded; import it "
                         "(or import toolkeeper)")
    return found
