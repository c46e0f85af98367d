"""What an upstream says, made fit to pass on: its text goes to clients (a tool's result, its
listings, a resource it reads) and to the operator's terminal (what it writes to stderr).

- A lone surrogate (``"\\ud800"`` in its JSON) is text no UTF-8 can carry: relayed as is, it
  went out as the same escape, and the official Python client's session died parsing it. Every
  string an upstream answers (keys included) has them replaced by U+FFFD, once, where its
  answer becomes ours (``scrubbed``, ``clean``).
- A line it writes to stderr is shown with a prefix naming it (a line that imitates one of
  ours still reads as the upstream's), its control characters escaped (no terminal title, no
  colours, no cursor moves) and its length capped (``stderr_line``).
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from ..builtins.fs import visible

__all__ = ["MAX_STDERR_LINE", "clean", "scrubbed", "shown_name", "stderr_line"]

T = TypeVar("T")

LONE = re.compile("[\ud800-\udfff]")
"""A surrogate code point: alone, since a JSON parser joins a valid pair into one character."""
MAX_STDERR_LINE = 4096
"""Characters of one stderr line of an upstream shown; the rest is cut and said."""


def scrubbed(value: T) -> T:
    """``value`` (JSON-like data) with every lone surrogate replaced by U+FFFD; the very same
    object when it has none (nothing copied)."""
    if isinstance(value, str):
        if value.isascii() or LONE.search(value) is None:
            return value
        return LONE.sub("\ufffd", value)  # type: ignore[return-value]
    if isinstance(value, dict):
        pairs = [(scrubbed(k), scrubbed(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, value.items(),
                                                                strict=True)):
            return value
        return dict(pairs)  # type: ignore[return-value]
    if isinstance(value, list):
        items = [scrubbed(v) for v in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return items  # type: ignore[return-value]
    return value


def clean(model: T) -> T:
    """A pydantic model an upstream answered, with ``scrubbed`` text: the same model when it
    has no lone surrogate, else one validated again from the scrubbed data."""
    dump = getattr(model, "model_dump", None)
    if dump is None:
        return model
    data = dump(by_alias=True, exclude_unset=True)
    fixed = scrubbed(data)
    if fixed is data:
        return model
    return type(model).model_validate(fixed, by_name=False)  # type: ignore[attr-defined, no-any-return]


def stderr_line(server: str, raw: bytes) -> str:
    """One line upstream ``server`` wrote to stderr, as the operator's terminal shows it: a
    prefix naming it, undecodable bytes and control characters escaped, at most
    ``MAX_STDERR_LINE`` characters; ends with a newline."""
    text = raw.decode("utf-8", "backslashreplace").rstrip("\r\n")
    cut = len(text) - MAX_STDERR_LINE
    text = visible(text[:MAX_STDERR_LINE])  # also writes a lone surrogate as its escape
    tail = f" [… {cut} more characters]" if cut > 0 else ""
    return f"[mcp server '{server}'] {text}{tail}\n"


def shown_name(name: Any) -> str:
    """An upstream's name for something, fit for a report line."""
    return visible(scrubbed(str(name)))[:200]
