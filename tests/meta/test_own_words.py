"""The project speaks of itself: its code, tests, docs and examples say what a behaviour is and
why, never which planning document or ticket it came from (none of those ship with it). A name
kept for compatibility says what it is kept for, in its own docstring and in docs/compat.md."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLACES = ("src", "tests", "docs", "examples", "README.md")
# A document that does not ship, a ticket number, or a planning document's word for itself.
FOREIGN = re.compile("|".join((r"(?i:se" + r"ed)", r"DES" + r"IGN\.md", r"SECUR" + r"ITY\.md",
                               r"(?i:\bis" + r"sues? #?\d+)")))
KEPT = {"SeedTool"}  # the earlier name of ToolProtocol, listed in docs/compat.md


def _files() -> list[Path]:
    found: list[Path] = []
    for place in PLACES:
        path = ROOT / place
        found += [path] if path.is_file() else sorted(
            p for p in path.rglob("*") if p.suffix in {".py", ".md", ".toml", ".txt"}
            and "__pycache__" not in p.parts)
    return found


def _foreign(text: str) -> list[str]:
    words = {m.group(0) for m in re.finditer(r"\w*(?:" + FOREIGN.pattern + r")\w*", text)}
    return sorted(words - KEPT)


def test_nothing_names_a_document_or_ticket_that_does_not_ship() -> None:
    found = {str(p.relative_to(ROOT)): words for p in _files()
             if p != Path(__file__) and (words := _foreign(p.read_text(encoding="utf-8")))}
    assert found == {}


def test_no_test_file_or_test_is_named_after_one() -> None:
    named = [str(p.relative_to(ROOT)) for p in _files() if FOREIGN.search(p.name)]
    assert named == []
