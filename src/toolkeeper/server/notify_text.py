"""A notification's summary of a call's arguments, as its card shows them: the same card view
(a tool's own, a built-in's — the command and its sandbox for ``shell``, a diff for
``file_write`` — or the generic one), written as lines of text with every invisible character
made visible (``card_text.plain``). The notifier cuts the lines and says what it cut."""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable

from ..toolbox.catalog import CatalogBase
from .card_text import plain
from .cards import Section
from .views import card_sections

__all__ = ["card_summary", "section_lines"]

_TEXT_LINES = 12
"""Lines of a text or diff section a summary shows (the notifier cuts the whole summary too)."""


def card_summary(catalog: CatalogBase | None = None
                 ) -> Callable[[str, dict[str, object]], list[str]]:
    """A ``Summarize`` for the notifier: the card's sections of ``(tool, arguments)`` as
    lines (``catalog``: the invoker's registry, for the built-in tools' views)."""
    def summarize(tool: str, arguments: dict[str, object]) -> list[str]:
        sections, _note, _raw = card_sections(tool, arguments, catalog)
        return [plain(line) for section in sections for line in section_lines(section)]
    return summarize


def section_lines(section: Section) -> list[str]:
    """One card section as lines of text."""
    if section.kind == "rows":
        return [f"{key}: {value if isinstance(value, str) else json.dumps(value)}"
                for key, value in section.rows]
    if section.kind == "url":
        return [f"{section.title}: {section.method} {section.url}".replace("  ", " ")]
    if section.kind == "text":
        return _block(section.title, section.text.split("\n"))
    changed = [line for line in difflib.unified_diff(
        (section.old or "").split("\n"), section.new.split("\n"), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    added = sum(line.startswith("+") for line in changed)
    return _block(f"{section.title} (diff: +{added} -{len(changed) - added} lines)", changed)


def _block(title: str, lines: list[str]) -> list[str]:
    shown = [f"  {line}" for line in lines[:_TEXT_LINES]]
    if len(lines) > _TEXT_LINES:
        shown.append(f"  … [{len(lines) - _TEXT_LINES:,} more lines: the card shows all]")
    return [f"{title}:", *shown]
