"""Localized tool descriptions: locale resolution, description catalogs, localized views."""

from .catalog import PACKAGE_DIR, DescriptionCatalog
from .locale import locale_chain, normalize_locale, resolve_locale
from .view import LocalizedView

__all__ = [
    "PACKAGE_DIR",
    "DescriptionCatalog",
    "LocalizedView",
    "locale_chain",
    "normalize_locale",
    "resolve_locale",
]
