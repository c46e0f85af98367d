"""Localized tool descriptions from ``tool_descriptions/<locale>.toml`` files.

A file has a ``[tools]`` table (tool name → description) and, optionally, ``[parameters.<tool>]``
tables (parameter name → description). Files are searched in the workspace, then in the installed
package, then in the current project root; a key missing in the locale falls back to its
language, then to English, then to the tool's own text — never to a blank.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError
from .locale import locale_chain, resolve_locale

__all__ = ["PACKAGE_DIR", "DescriptionCatalog"]

PACKAGE_DIR = Path(__file__).resolve().parent / "tool_descriptions"


@dataclass
class _Table:
    """One locale's descriptions, merged over the search directories: tool name → text, and
    tool name → parameter name → text (values as the files give them; read as text only)."""

    tools: dict[str, object] = field(default_factory=dict)
    parameters: dict[str, dict[str, object]] = field(default_factory=dict)


class DescriptionCatalog:
    """Descriptions for one locale, with per-key fallback."""

    def __init__(
        self, locale: str | None = None, *, workspace: str | Path | None = None,
        search_dirs: Iterable[str | Path] | None = None,
    ) -> None:
        self.locale = resolve_locale(locale)
        dirs: list[Path] = []
        if workspace is not None:
            dirs.append(Path(workspace) / "tool_descriptions")
        dirs.extend(Path(d) for d in (search_dirs or ()))
        dirs += [PACKAGE_DIR, Path.cwd() / "tool_descriptions"]
        self.dirs = dirs
        self._tables = [self._load(loc) for loc in locale_chain(self.locale)]

    def _load(self, locale: str) -> _Table:
        merged = _Table()
        for directory in reversed(self.dirs):  # earlier directories override later ones
            path = directory / f"{locale}.toml"
            if not path.is_file():
                continue
            try:
                data = tomllib.loads(path.read_text(encoding="utf-8"))
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(f"{path}: {exc}") from exc
            merged.tools.update(data.get("tools") or {})
            for tool, params in (data.get("parameters") or {}).items():
                merged.parameters.setdefault(tool, {}).update(params)
        return merged

    def description(self, tool: str, default: str = "") -> str:
        """The tool's description in the best available locale, else ``default``."""
        for table in self._tables:
            text = table.tools.get(tool)
            if isinstance(text, str) and text.strip():
                return text
        return default

    def parameter(self, tool: str, parameter: str, default: str | None = None) -> str | None:
        """A parameter's description in the best available locale, else ``default``."""
        for table in self._tables:
            text = table.parameters.get(tool, {}).get(parameter)
            if isinstance(text, str) and text.strip():
                return text
        return default

    def has(self, tool: str) -> bool:
        """Whether any locale in the chain describes ``tool``."""
        return any(tool in table.tools for table in self._tables)
