"""Benchmark: MCP ``tools/call`` round trips per second, side by side in one run.

Three servers offer the same trivial async tool ``add(a, b)`` (async, so no server pays a
thread hand-off — a sync tool costs toolkeeper ~150 µs more per call in its worker pool, see
bench_invoke): toolkeeper's (``mcp_server`` — every call
through the invoker's full default door), a bare official-SDK low-level server (the handler
adds the two numbers and returns them as text and structured content under the same output
schema, nothing else), and a FastMCP server (``@mcp.tool``, as its docs set it up).
Each runs as its own process, over stdio and over Streamable HTTP (stateless, on loopback); one
official-SDK ``Client`` makes the calls one after another with random arguments. Rounds are
interleaved (every server once per round, shuffled) and the median is reported.

    python benchmarks/bench_mcp.py [--calls 500] [--rounds 3]
"""

from __future__ import annotations

import argparse
import random
import select
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

SERVERS = ("toolkeeper", "bare SDK", "FastMCP")


def serve(kind: str, transport: str, port: int) -> None:
    """The server process: ``bench_mcp.py --serve KIND TRANSPORT PORT``."""
    if kind == "FastMCP":
        from fastmcp import FastMCP

        app = FastMCP("bench")

        @app.tool
        async def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        if transport == "stdio":
            app.run(show_banner=False)
        else:
            app.run(transport="http", host="127.0.0.1", port=port, show_banner=False,
                    stateless_http=True, log_level="warning")
        return
    server = _toolkeeper() if kind == "toolkeeper" else bare_server()
    if transport == "stdio":
        from mcp.server.stdio import stdio_server

        async def run() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(run)
        return
    import uvicorn

    app = server.streamable_http_app(streamable_http_path="/mcp", stateless_http=True)
    print("ready", flush=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def _toolkeeper() -> Any:
    from toolkeeper import ToolInvoker, tool
    from toolkeeper.invoke import ChainPolicy
    from toolkeeper.mcp.server import mcp_server

    @tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return mcp_server(ToolInvoker([add], policy=ChainPolicy(max_tool_calls=10**9,
                                                             total_timeout_s=10.0**9)))


def bare_server() -> Any:
    """The official SDK's low-level Server offering ``add`` (bench_serve.py serves it too)."""
    import mcp_types as types
    from mcp.server.lowlevel.server import Server

    # The same protocol work as the others: an output schema, structured content and text.
    tool = types.Tool(name="add", description="Add two integers.", input_schema={
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"]}, output_schema={
        "type": "object", "properties": {"result": {"type": "integer"}}, "required": ["result"]})

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool])

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = params.arguments or {}
        total = args["a"] + args["b"]
        return types.CallToolResult(content=[types.TextContent(text=str(total))],
                                    structured_content={"result": total})

    return Server("bench", on_list_tools=list_tools, on_call_tool=call_tool)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _calls(client: Any, calls: int, rng: random.Random) -> float:
    for _ in range(20):
        await client.call_tool("add", {"a": 1, "b": 2})
    start = time.perf_counter()
    for _ in range(calls):
        result = await client.call_tool("add", {"a": rng.randrange(10**6), "b": rng.randrange(10)})
        assert not result.is_error, result
    return calls / (time.perf_counter() - start)


def measure(kind: str, transport: str, calls: int, seed: int) -> float:
    from mcp import Client, StdioServerParameters

    rng = random.Random(seed)
    me = str(Path(__file__).resolve())
    if transport == "stdio":
        params = StdioServerParameters(command=sys.executable,
                                       args=[me, "--serve", kind, "stdio", "0"])

        async def run_stdio() -> float:
            async with Client(params) as client:
                return await _calls(client, calls, rng)

        return anyio.run(run_stdio)
    port = _free_port()
    proc = subprocess.Popen([sys.executable, me, "--serve", kind, "http", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            select.select([], [], [], 0.05)

        async def run_http() -> float:
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                return await _calls(client, calls, rng)

        return anyio.run(run_http)
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--serve", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve[0], args.serve[1], int(args.serve[2]))
        return
    samples: dict[tuple[str, str], list[float]] = {}
    for round_ in range(args.rounds):
        order = [(k, t) for t in ("stdio", "http") for k in SERVERS]
        random.Random(round_).shuffle(order)
        for kind, transport in order:
            samples.setdefault((kind, transport), []).append(
                measure(kind, transport, args.calls, round_))
    print(f"Python {sys.version.split()[0]}, {args.calls} sequential calls per server, "
          f"{args.rounds} interleaved rounds (median)\n")
    print("| transport | server | calls/s | µs per call | ÷ toolkeeper (time) |")
    print("|---|---|---:|---:|---:|")
    for transport in ("stdio", "http"):
        ours = statistics.median(samples[("toolkeeper", transport)])
        for kind in SERVERS:
            rate = statistics.median(samples[(kind, transport)])
            print(f"| {transport} | {kind} | {rate:,.0f} | {1e6 / rate:,.0f} | "
                  f"{ours / rate:.2f}x |")


if __name__ == "__main__":
    main()
