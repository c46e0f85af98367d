"""A toolkeeper MCP server over stdio, for the tests: ``python stdio_server.py CALLS_LOG``.

Every tool appends its name to CALLS_LOG when it really runs, so a test can tell what ran."""

from __future__ import annotations

import sys
from pathlib import Path

from toolkeeper import ToolInvoker, ToolRisk, tool
from toolkeeper.mcp.server import serve_stdio

LOG = Path(sys.argv[1])


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    with LOG.open("a") as log:
        log.write("add\n")
    return a + b


@tool(risk=ToolRisk.HIGH)
def delete_everything(path: str) -> str:
    """Delete a path (needs approval; there is no handler, so it is denied)."""
    with LOG.open("a") as log:
        log.write("delete_everything\n")
    return "deleted"


serve_stdio(ToolInvoker([add, delete_everything]))
