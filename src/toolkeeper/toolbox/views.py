"""Lenses: what a view changes about the catalog it wraps, never the tools.

A lens maps names both ways — ``to_outer`` names an inner entry as shown (``None`` hides it),
``to_inner`` finds the inner name behind a shown one — and decides how an entry is shown. A
``View`` (``catalog.py``) applies one lens over any catalog, and views compose, so for any stack
a shown name reaches the tool that was shown.

The lenses do not import the catalog: the catalog imports them, so ``filtered()``,
``localized()``, ``with_skill()`` and the rest are ordinary methods of the catalog. A new kind of
view is a new ``Lens`` subclass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, ClassVar

from ..core.risk import ToolRisk
from ..core.spec import ToolLike
from ..errors import UnknownToolError
from ..i18n.localize import localize_tool
from ..tools.tool import Tool
from .categories import CategoryTree
from .entry import CatalogEntry

if TYPE_CHECKING:
    from ..i18n.catalog import DescriptionCatalog
    from ..skills.skill import Skill
    from .catalog import CatalogBase

__all__ = ["FilterLens", "Lens", "LocaleLens", "RenameLens", "SkillLens"]


class Lens:
    """The identity lens: every entry shown as it is, under its own name."""

    rewords: ClassVar[bool] = False
    """Whether shown entries read differently from the inner ones (other descriptions): a view
    through such a lens searches its own text rather than the inner catalog's index."""

    instructions: str = ""
    """What to append to the system prompt while a view through this lens is in use."""

    def to_outer(self, name: str) -> str | None:
        return name

    def to_inner(self, name: str) -> str | None:
        return name

    def show(self, entry: CatalogEntry) -> CatalogEntry | None:
        """The entry as the view shows it, or ``None`` to hide it."""
        return entry

    def added(self) -> list[CatalogEntry]:
        """Entries the view itself adds in front of the inner ones (none by default)."""
        return []

    def refusal(self, name: str, inner: CatalogBase) -> UnknownToolError | None:
        """The error for a name the view does not show, when the lens has a better one than
        "unknown tool" (``None``: the view's default, naming the closest shown names)."""
        return None


class FilterLens(Lens):
    """Shows only tools matching every given condition (tags: any of them)."""

    def __init__(
        self, *, tags: Iterable[str] | None = None, names: Iterable[str] | None = None,
        max_risk: ToolRisk | str | None = None, categories: Iterable[str] | None = None,
        predicate: Callable[[CatalogEntry], bool] | None = None,
    ) -> None:
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


class RenameLens(Lens):
    """Shows tools under other names: an explicit mapping, or a prefix for every name."""

    def __init__(self, mapping: dict[str, str] | None = None, *, prefix: str | None = None,
                 sep: str = "_") -> None:
        self._out = dict(mapping or {})
        self._in = {v: k for k, v in self._out.items()}
        if len(self._in) != len(self._out):
            raise ValueError("a rename mapping must not give two tools the same name")
        self._prefix = f"{prefix}{sep}" if prefix is not None else None

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


class LocaleLens(Lens):
    """Shows each tool with its description and parameter descriptions in one locale."""

    rewords = True

    def __init__(self, catalog: DescriptionCatalog) -> None:
        self.catalog = catalog
        self._translated: dict[int, tuple[Tool, ToolLike]] = {}

    def show(self, entry: CatalogEntry) -> CatalogEntry | None:
        return replace(entry, tool=self._translate(entry.tool))

    def _translate(self, tool: ToolLike) -> ToolLike:
        if not isinstance(tool, Tool):
            return tool
        cached = self._translated.get(id(tool))
        if cached is not None and cached[0] is tool:
            return cached[1]
        translated = localize_tool(tool, self.catalog)
        self._translated[id(tool)] = (tool, translated)
        return translated


class SkillLens(Lens):
    """Only the skill's allowed tools; a call to any other is refused naming the skill."""

    def __init__(self, skill: Skill) -> None:
        self.skill = skill
        self._allowed = frozenset(skill.allowed_tools)
        self.instructions = skill.prompt()

    def show(self, entry: CatalogEntry) -> CatalogEntry | None:
        names = {entry.name, entry.tool.name, *entry.aliases}
        return entry if names & self._allowed else None

    def refusal(self, name: str, inner: CatalogBase) -> UnknownToolError:
        allowed = ", ".join(sorted(self._allowed)) or "no tools"
        if inner.get(name) is not None:
            return UnknownToolError(
                f"tool '{name}' is not available while skill '{self.skill.name}' is active "
                f"(it allows: {allowed})", tool_name=name, details={"skill": self.skill.name})
        return UnknownToolError(f"unknown tool '{name}' (skill '{self.skill.name}' allows: "
                                f"{allowed})", tool_name=name)
