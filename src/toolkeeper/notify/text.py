"""Text a model chose, made safe to put in a message a person reads elsewhere: secrets masked,
every invisible character written as an escape (control, bidi, zero-width, line separators —
a message must read as what it is), long values cut with a marker that says how much is left
out and where to see it."""

from __future__ import annotations

import json
import re

from ..guardrails.builtin import SecretRedactor

__all__ = ["LINE_CHARS", "MAX_LINES", "cut_lines", "generic_summary", "mask_secrets", "plain"]

LINE_CHARS = 200
"""The longest line of a summary; the rest is cut with a marker."""
MAX_LINES = 24
"""The most lines of a summary; the rest are counted in a marker."""
_SECRET = re.compile(SecretRedactor().pattern.pattern)
MASK = "[REDACTED]"


def plain(text: str) -> str:
    """``text`` with every character ``str.isprintable`` refuses written as an escape
    (``\\u202e``), as the approval card shows names and reasons."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in text)


def mask_secrets(value: object) -> object:
    """``value`` with API keys, tokens and private keys in its strings masked (as the audit
    log masks them): a message leaves for another service."""
    if isinstance(value, str):
        return _SECRET.sub(MASK, value)
    if isinstance(value, dict):
        return {str(k): mask_secrets(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask_secrets(v) for v in value]
    return value


def cut_lines(lines: list[str]) -> tuple[str, ...]:
    """At most ``MAX_LINES`` lines of at most ``LINE_CHARS`` characters, each made plain;
    what is cut is said, never dropped silently."""
    shown = []
    for line in lines[:MAX_LINES]:
        line = plain(line)
        if len(line) > LINE_CHARS:
            line = (f"{line[:LINE_CHARS]}… [{len(line) - LINE_CHARS:,} more characters: the "
                    "card shows all]")
        shown.append(line)
    if len(lines) > MAX_LINES:
        shown.append(f"… [{len(lines) - MAX_LINES:,} more lines: the card shows all]")
    return tuple(shown)


def generic_summary(_tool: str, arguments: dict[str, object]) -> list[str]:
    """Each argument as ``path: value`` (JSON literals; a text of several lines as its lines),
    for a notifier that has no card views."""
    lines: list[str] = []
    for path, value in _leaves(arguments, ""):
        if isinstance(value, str) and "\n" in value:
            lines.append(f"{path}: ({value.count(chr(10)) + 1} lines)")
            lines += [f"  {line}" for line in value.split("\n")]
        else:
            lines.append(f"{path}: {json.dumps(value, ensure_ascii=False, default=str)}")
    return lines or ["(no arguments)"]


def _leaves(value: object, path: str) -> list[tuple[str, object]]:
    if isinstance(value, dict) and value:
        return [leaf for k, v in value.items()
                for leaf in _leaves(v, f"{path}.{k}" if path else str(k))]
    if isinstance(value, list) and value and len(value) <= 20:
        return [leaf for n, v in enumerate(value) for leaf in _leaves(v, f"{path}[{n}]")]
    return [(path or "(arguments)", value)]
