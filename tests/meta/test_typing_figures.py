"""The typed rooms stay typed: ``Any`` (the word, as ``grep -ow Any`` counts it) at most 12 per
1,000 physical lines in each of them. JSON is core.json's JsonValue/JsonObject, a value passed
through is ``object``, a user's callable ``Callable[..., object]``, an SDK's object its own type;
what is left is where a library hands back the user's own values. mypy holds most of these
rooms to no explicit ``Any`` at all (pyproject.toml, ``disallow_any_explicit``)."""

from __future__ import annotations

import re

from .test_layers import SRC

ROOMS = ("tools", "formats", "toolbox", "adapters", "compat", "i18n", "skills", "testing",
         "core", "invoke")
PER_THOUSAND = 12
_WORD = re.compile(r"\bAny\b")


def _density(room: str) -> tuple[int, int]:
    texts = [p.read_text() for p in (SRC / room).rglob("*.py")]
    return sum(len(_WORD.findall(t)) for t in texts), sum(len(t.splitlines()) for t in texts)


def test_each_typed_room_has_at_most_twelve_any_per_thousand_lines() -> None:
    over = {}
    for room in ROOMS:
        found, lines = _density(room)
        if found * 1000 > PER_THOUSAND * lines:
            over[room] = f"{found} in {lines} lines ({1000 * found / lines:.1f} per 1,000)"
    assert over == {}
