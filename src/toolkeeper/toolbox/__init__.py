"""The catalog: ``Toolbox``, views, categories, search and deferred loading."""

from .catalog import (
    CatalogBase,
    DeferredView,
    FilteredView,
    LocalizedView,
    RenamedView,
    SkillView,
    View,
)
from .categories import BUILTIN_CATEGORIES, CategoryNode, CategoryTree, normalize_category
from .deferred import ToolSearchLens, native_deferred_tools
from .entry import CapabilityEntry, CatalogEntry, ChangeEvent, ToolConflictWarning
from .registry import ToolRegistry
from .search import SearchHit
from .tokenize import tokenize
from .toolbox import CapabilityRegistry, Toolbox, as_toolbox
from .views import FilterLens, Lens, LocaleLens, RenameLens, SkillLens

__all__ = [
    "BUILTIN_CATEGORIES",
    "CapabilityEntry",
    "CapabilityRegistry",
    "CatalogBase",
    "CatalogEntry",
    "CategoryNode",
    "CategoryTree",
    "ChangeEvent",
    "DeferredView",
    "FilterLens",
    "FilteredView",
    "Lens",
    "LocaleLens",
    "LocalizedView",
    "RenameLens",
    "RenamedView",
    "SearchHit",
    "SkillLens",
    "SkillView",
    "ToolConflictWarning",
    "ToolRegistry",
    "ToolSearchLens",
    "Toolbox",
    "View",
    "as_toolbox",
    "native_deferred_tools",
    "normalize_category",
    "tokenize",
]
