"""A toolkeeper MCP server over stdio, for the tests: ``python stdio_server.py CALLS_LOG``.

Every tool appends its name to CALLS_LOG when it really runs (``crunch`` when it finishes), so
a test can tell what ran."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from toolkeeper import ToolContext, ToolInvoker, ToolRisk, tool
from toolkeeper.mcp.server import serve_stdio
from toolkeeper.toolbox import Toolbox

LOG = Path(sys.argv[1])


def _log(name: str) -> None:
    with LOG.open("a") as log:
        log.write(name + "\n")


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    _log("add")
    return a + b


@tool(risk=ToolRisk.HIGH)
def delete_everything(path: str) -> str:
    """Delete a path (needs approval; there is no handler, so it is denied)."""
    _log("delete_everything")
    return "deleted"


@tool
async def crunch(steps: int, ctx: ToolContext) -> str:
    """Crunch, reporting progress; more than 3 steps takes half a minute."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
    if steps > 3:
        await anyio.sleep(30)
    _log("crunch")
    return "crunched"


@tool
def late() -> str:
    """Added by grow."""
    return "late"


BOX = Toolbox([add, delete_everything, crunch])


@tool
def grow() -> str:
    """Add the tool 'late' to the catalog."""
    BOX.add(late)
    return "grown"


BOX.add(grow)
serve_stdio(ToolInvoker(BOX))
