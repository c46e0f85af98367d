"""Benchmark: listing a large catalog over MCP — every page of ``tools/list`` read by the official
client, in process (no network), for 10,000 and 20,000 tools.

    python benchmarks/bench_list.py [--sizes 10000 20000]

Prints the seconds to read every page (the first export of the catalog included) per size.
"""

from __future__ import annotations

import argparse
import time

import anyio
from mcp import Client

from toolkeeper import Tool, Toolbox, ToolInvoker
from toolkeeper.mcp.server import mcp_server


def catalog(size: int) -> Toolbox:
    box = Toolbox()
    for i in range(size):
        def f(x: int) -> int:
            return x
        box.add(Tool.from_function(f, name=f"tool_{i:05d}", description=f"tool number {i}"))
    return box


async def list_all(size: int) -> tuple[int, float]:
    server = mcp_server(ToolInvoker(catalog(size)))
    async with Client(server) as client:
        started, cursor, count = time.perf_counter(), None, 0
        while True:
            page = await client.list_tools(cursor=cursor) if cursor else await client.list_tools()
            count += len(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return count, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 20_000])
    for size in parser.parse_args().sizes:
        count, seconds = anyio.run(list_all, size)
        assert count == size, (count, size)
        print(f"{size} tools: every page listed in {seconds:.2f} s")


if __name__ == "__main__":
    main()
