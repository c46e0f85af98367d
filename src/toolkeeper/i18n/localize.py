"""Tools shown in a locale: a copy of each tool with its descriptions from a catalog.

A tool may say how it is looked up through ``metadata.extra["i18n"]``: ``key``, a variant of its
description (``"shell.unconfined"``: the shell without a sandbox, whose description carries a
safety note the confined one does not), and ``args``, the values of the ``{placeholders}`` its
description has (``read_skill``'s ``{skills}``). A variant missing from every locale keeps the
tool's own text, never the plain tool's, so a safety note is never lost.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..core.spec import ToolLike
from ..tools.tool import Tool
from .catalog import DescriptionCatalog

__all__ = ["PLACEHOLDER", "description_key", "fill", "localize_tool", "localized_tools"]

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
"""``{name}`` in a description: filled from the tool's ``i18n`` args."""


def _hints(tool: Tool) -> Mapping[str, object]:
    hints = tool.metadata.extra.get("i18n") if tool.metadata is not None else None
    return hints if isinstance(hints, Mapping) else {}


def description_key(tool: Tool) -> str | None:
    """The key of the tool's description variant (``shell.unconfined``), or ``None``."""
    key = _hints(tool).get("key")
    return key if isinstance(key, str) and key else None


def fill(text: str, args: Mapping[str, object]) -> str:
    """``text`` with each ``{name}`` that ``args`` has replaced by its value; others kept."""
    return PLACEHOLDER.sub(lambda m: str(args[m[1]]) if m[1] in args else m[0], text)


def localize_tool(tool: ToolLike, catalog: DescriptionCatalog) -> ToolLike:
    """``tool`` with its description and parameter descriptions in ``catalog``'s locale (each
    key falling back on its own); anything that is not a ``Tool`` is returned as it is."""
    if not isinstance(tool, Tool):
        return tool
    found = _hints(tool).get("args")
    args: Mapping[str, object] = found if isinstance(found, Mapping) else {}
    base = tool.method_name or tool.name
    variant = description_key(tool)
    if variant is not None:
        text = catalog.description(variant, "")
    else:
        text = catalog.description(tool.name, catalog.description(base, ""))
    description = fill(text, args) if text else ""
    properties = tool.definition.parameters.get("properties")
    params = {
        name: shown for name in (properties if isinstance(properties, dict) else {})
        if (shown := catalog.parameter(tool.name, name, catalog.parameter(base, name)))
    }
    if not description and not params:
        return tool
    return tool.with_descriptions(description or None, params)


def localized_tools(tools: Iterable[ToolLike], locale: str | None = None, *,
                    workspace: str | Path | None = None) -> list[ToolLike]:
    """``tools`` in the resolved locale (``locale``, else ``TOOLKEEPER_LOCALE``, ``LANG``,
    ``LC_ALL``, else English), ``workspace``'s ``tool_descriptions/`` overriding the shipped
    files — what ``toolkeeper serve`` offers as the built-ins."""
    catalog = DescriptionCatalog(locale, workspace=workspace)
    return [localize_tool(tool, catalog) for tool in tools]
