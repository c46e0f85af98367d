"""The catalog as MCP clients see it, exported once per catalog version and read by every part
of the server that needs it: ``tools/list`` (sorted once per export, a page a bisection and a
slice), ``tools/call`` (a wire name back to its tool), the SDK's 2026-07-28 entry (a tool's
input schema, for its ``Mcp-Param-*`` headers) and the gate (which tool a request names)."""

from __future__ import annotations

import base64
import bisect
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from ..formats import WireExport
from ..toolbox.catalog import CatalogBase
from .wire import INVALID_PARAMS

__all__ = ["Exported", "decode_cursor", "encode_cursor", "page_of"]


class Exported:
    """The MCP export of ``catalog``, made again when the catalog changed (or, for a catalog
    that does not count its changes, at every listing) or a call names an unknown tool."""

    def __init__(self, catalog: CatalogBase) -> None:
        self.catalog = catalog
        self.current: WireExport = catalog.export("mcp")
        self._version = getattr(catalog, "version", None)
        self._sorted: tuple[WireExport | None, list[dict[str, Any]], list[str]] = (None, [], [])
        self._schemas: tuple[WireExport | None, dict[str, Mapping[str, Any]]] = (None, {})

    def of(self, wire: str | None = None) -> WireExport:
        """The export in force: of the catalog's version (a catalog without one: exported
        again for every listing, ``wire`` ``None``), and for a call of ``wire``, one that
        knows it if the catalog does."""
        version = getattr(self.catalog, "version", None)
        stale = version != self._version or (version is None and wire is None)
        if stale or (wire is not None and wire not in self.current.names):
            self.current, self._version = self.catalog.export("mcp"), version
        return self.current

    def listing(self) -> tuple[list[dict[str, Any]], list[str]]:
        """The declarations in name order and their names, sorted once per export."""
        exported = self.of()
        if self._sorted[0] is not exported:
            declarations = sorted(exported.declarations, key=lambda d: str(d["name"]))
            self._sorted = (exported, declarations, [str(d["name"]) for d in declarations])
        return self._sorted[1], self._sorted[2]

    def input_schema(self, wire: str) -> Mapping[str, Any] | None:
        """The input schema of the tool named ``wire`` on the wire (``None``: no such tool),
        without running the whole ``tools/list`` handler on every call."""
        exported = self.of(wire)
        if self._schemas[0] is not exported:
            self._schemas = (exported, {str(d["name"]): schema for d in exported.declarations
                                        if isinstance(schema := d.get("inputSchema"), Mapping)})
        return self._schemas[1].get(wire)

    def tool_name(self, wire: str) -> str | None:
        """The catalog name of the tool ``wire`` names, or ``None``."""
        exported = self.of(wire)
        return exported.names.name(wire) if wire in exported.names else None


_CURSOR = b"tools-after:"
"""What every cursor starts with before its encoding: text that is not a cursor of ours (a
guess, another server's, another list's) is refused rather than read as a place in the list."""


def encode_cursor(name: str) -> str:
    """The opaque cursor of a ``tools/list`` page that ends at the tool ``name``."""
    return base64.urlsafe_b64encode(_CURSOR + name.encode("utf-8")).decode("ascii")


def decode_cursor(cursor: str) -> str | None:
    """The name a cursor ends at, or ``None`` for a cursor that is not one of ours."""
    try:
        raw = base64.urlsafe_b64decode(cursor.encode("ascii"))
        return raw[len(_CURSOR):].decode("utf-8") if raw.startswith(_CURSOR) else None
    except (ValueError, UnicodeError):
        return None


def page_of(declarations: list[dict[str, Any]], names: list[str], cursor: str | None,
            size: int) -> types.ListToolsResult:
    """The ``tools/list`` page after ``cursor`` (the first without one): ``size`` tools of
    ``declarations`` (in the order of their ``names``), and the cursor of the next page."""
    start = 0
    if cursor:
        after = decode_cursor(cursor)
        if after is None:
            raise MCPError(code=INVALID_PARAMS, message="invalid cursor: pass the nextCursor of "
                                                "the previous page, or none to start over")
        start = bisect.bisect_right(names, after)
    page = declarations[start:start + size]
    more = start + size < len(declarations)
    return types.ListToolsResult(
        tools=[types.Tool.model_validate(d) for d in page],
        next_cursor=encode_cursor(str(page[-1]["name"])) if more and page else None)
