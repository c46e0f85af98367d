"""Docstrings → a description and per-parameter descriptions (Google, NumPy and Sphinx styles)."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

import docstring_parser

__all__ = ["ParsedDocstring", "parse_docstring"]

_SPHINX = re.compile(r"^\s*:(param|parameter|arg|argument|key|keyword|returns?|raises?)\b", re.M)
_NUMPY = re.compile(r"^\s*(Parameters|Returns|Yields|Raises|Other Parameters)\s*\n\s*-{3,}\s*$", re.M)
_GOOGLE = re.compile(
    r"^\s*(Args|Arguments|Parameters|Params|Returns|Return|Raises|Yields|Keyword Args|"
    r"Keyword Arguments|Example|Examples|Note|Notes)\s*:\s*$",
    re.M,
)


@dataclass(frozen=True)
class ParsedDocstring:
    """The parts of a docstring a tool needs."""

    description: str = ""
    params: dict[str, str] = field(default_factory=dict)
    returns: str | None = None


def _style(doc: str) -> docstring_parser.DocstringStyle | None:
    if _SPHINX.search(doc):
        return docstring_parser.DocstringStyle.REST
    if _NUMPY.search(doc):
        return docstring_parser.DocstringStyle.NUMPYDOC
    if _GOOGLE.search(doc):
        return docstring_parser.DocstringStyle.GOOGLE
    return None


def parse_docstring(doc: str | None) -> ParsedDocstring:
    """Split a docstring into its description and its parameter descriptions.

    The style is detected from its section markers, so plain docstrings cost no parsing.
    """
    if not doc or not doc.strip():
        return ParsedDocstring()
    style = _style(doc)
    if style is None:
        return ParsedDocstring(description=inspect.cleandoc(doc))
    parsed = docstring_parser.parse(doc, style=style)
    parts = [part for part in (parsed.short_description, parsed.long_description) if part]
    params = {
        p.arg_name.lstrip("*"): " ".join(p.description.split())
        for p in parsed.params
        if p.description
    }
    returns = parsed.returns.description if parsed.returns else None
    return ParsedDocstring(description="\n\n".join(parts).strip(), params=params, returns=returns)
