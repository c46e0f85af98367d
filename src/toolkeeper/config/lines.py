"""Where a setting is written in a TOML file: the line a config error names."""

from __future__ import annotations

__all__ = ["header", "line_of", "section_line"]


def section_line(text: str, section: str) -> int | None:
    """The line where ``section`` (a table, or a top-level key) is written in ``text``."""
    top = True
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line.startswith("["):
            top, name = False, header(line)
        elif top:
            name = line.split("=", 1)[0].strip()
        else:
            continue
        if name == section or name.startswith(section + "."):
            return number
    return None


def header(line: str) -> str:
    """A table header's name: ``[web_fetch]   # a comment`` is ``web_fetch``."""
    return line.split("#", 1)[0].strip().strip("[]").strip()


def line_of(text: str, key: str) -> int | None:
    """The line where ``key`` (``section.leaf``, or a top-level one) is written in ``text``."""
    section, _, leaf = key.rpartition(".")
    in_section = not section
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line.startswith("["):
            name = header(line)
            if not section and (name == leaf or name.startswith(leaf + ".")):
                return number  # a top-level key written as a section
            in_section = name == section
            if in_section and not leaf:
                return number
            continue
        if in_section and line.split("=", 1)[0].strip() == leaf:
            return number
    return None
