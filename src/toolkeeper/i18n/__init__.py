"""Localized tool descriptions: locale resolution and description catalogs.

A catalog shows them through ``Toolbox.localized()`` (the view is ``toolkeeper.toolbox.LocalizedView``);
this package imports nothing of the catalog's, so the catalog imports it.
"""

from .catalog import PACKAGE_DIR, DescriptionCatalog
from .locale import locale_chain, normalize_locale, resolve_locale
from .localize import localize_tool, localized_tools

__all__ = [
    "PACKAGE_DIR",
    "DescriptionCatalog",
    "locale_chain",
    "localize_tool",
    "localized_tools",
    "normalize_locale",
    "resolve_locale",
]
