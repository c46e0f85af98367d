"""The catalog: ``Toolbox``, views, categories, search and deferred loading."""

from .catalog import CatalogBase
from .categories import BUILTIN_CATEGORIES, CategoryTree, normalize_category
from .deferred import DeferredView, native_deferred_tools
from .entry import CatalogEntry, ChangeEvent, ToolConflictWarning
from .search import SearchHit
from .tokenize import tokenize
from .toolbox import Toolbox, as_toolbox
from .views import FilteredView, RenamedView, View

__all__ = [
    "BUILTIN_CATEGORIES",
    "CatalogBase",
    "CatalogEntry",
    "CategoryTree",
    "ChangeEvent",
    "DeferredView",
    "FilteredView",
    "RenamedView",
    "SearchHit",
    "ToolConflictWarning",
    "Toolbox",
    "View",
    "as_toolbox",
    "native_deferred_tools",
    "normalize_category",
    "tokenize",
]
