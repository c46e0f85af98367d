"""Benchmark: what the gateway adds over calling an upstream MCP server directly.

The upstream is a bare official-SDK low-level server offering ``add(a, b)`` (text plus
structured content under an output schema), run as its own process over stdio. Measured side
by side in one run, calls one after another with random arguments, rounds interleaved:

- in process: ``client.call_tool`` on the SDK client connected to the upstream, against
  ``ToolInvoker.invoke`` of the gateway's ``up-add`` (the full default door: lookup,
  validation, approval check, timeout, audit in SQLite, result conversion) over the same kind
  of connection — the gateway's own cost;
- end to end: an MCP client calling the upstream over stdio, against the same client calling
  ``toolkeeper serve``-style gateway (``mcp_server`` with the gateway attached) over stdio,
  which calls the upstream — the cost a client sees, one more process hop included.

    python benchmarks/bench_gateway.py [--calls 500] [--rounds 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve()


def _upstream_params() -> Any:
    from mcp import StdioServerParameters

    return StdioServerParameters(command=sys.executable, args=[str(HERE), "--upstream"])


def _config() -> Any:
    from toolkeeper.config import MCPServerConfig

    return MCPServerConfig(name="up", command=sys.executable, args=[str(HERE), "--upstream"],
                           risk="safe", connect_timeout_s=60)


def upstream() -> None:
    """The upstream process: bench_mcp's bare SDK server (the same add), over stdio."""
    from bench_mcp import _bare
    from mcp.server.stdio import stdio_server

    server = _bare()

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


def gateway_server() -> None:
    """The gateway process: toolkeeper's MCP server with the upstream attached, over stdio."""
    from toolkeeper import ToolInvoker
    from toolkeeper.invoke import ChainPolicy
    from toolkeeper.mcp.gateway import MCPGateway
    from toolkeeper.mcp.server import serve_stdio
    from toolkeeper.toolbox import Toolbox

    invoker = ToolInvoker(Toolbox(), policy=ChainPolicy(max_tool_calls=10**9,
                                                       total_timeout_s=10.0**9))
    serve_stdio(invoker, gateway=MCPGateway([_config()]))


async def _timed(call: Any, calls: int, rng: random.Random) -> list[float]:
    for _ in range(20):
        await call(1, 2)
    times = []
    for _ in range(calls):
        a, b = rng.randrange(10**6), rng.randrange(10)
        start = time.perf_counter()
        await call(a, b)
        times.append(time.perf_counter() - start)
    return times


async def in_process(kind: str, calls: int, rng: random.Random) -> list[float]:
    from mcp import Client

    from toolkeeper import ToolInvoker
    from toolkeeper.core.call import ToolCall
    from toolkeeper.invoke import ChainPolicy
    from toolkeeper.invoke.audit import SqliteAuditLog
    from toolkeeper.mcp.gateway import MCPGateway
    from toolkeeper.toolbox import Toolbox

    if kind == "direct":
        async with Client(_upstream_params()) as client:
            async def direct(a: int, b: int) -> None:
                result = await client.call_tool("add", {"a": a, "b": b})
                assert not result.is_error
            return await _timed(direct, calls, rng)
    toolbox = Toolbox()
    with tempfile.TemporaryDirectory() as state:
        audit = SqliteAuditLog(Path(state) / "audit.db")
        invoker = ToolInvoker(toolbox, policy=ChainPolicy(max_tool_calls=10**9,
                                                          total_timeout_s=10.0**9), audit=audit)
        async with MCPGateway([_config()]) as gateway, invoker.open_session() as session:
            await gateway.attach(toolbox)

            async def governed(a: int, b: int) -> None:
                result = await invoker.invoke(
                    ToolCall(id="c", name="up-add", arguments={"a": a, "b": b}),
                    session=session)
                assert result.ok, result.text
            return await _timed(governed, calls, rng)


async def end_to_end(kind: str, calls: int, rng: random.Random) -> list[float]:
    from mcp import Client, StdioServerParameters

    params = _upstream_params() if kind == "direct" else StdioServerParameters(
        command=sys.executable, args=[str(HERE), "--gateway"])
    name = "add" if kind == "direct" else "up-add"
    async with Client(params) as client:
        async def call(a: int, b: int) -> None:
            result = await client.call_tool(name, {"a": a, "b": b})
            assert not result.is_error, result
        return await _timed(call, calls, rng)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--upstream", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--gateway", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.upstream:
        upstream()
        return
    if args.gateway:
        gateway_server()
        return
    runs = {("in process", "direct"): in_process, ("in process", "gateway"): in_process,
            ("end to end", "direct"): end_to_end, ("end to end", "gateway"): end_to_end}
    samples: dict[tuple[str, str], list[float]] = {key: [] for key in runs}
    for round_ in range(args.rounds):
        order = list(runs)
        random.Random(round_).shuffle(order)
        for key in order:
            rng = random.Random(round_ * 7 + len(key[1]))
            samples[key] += anyio.run(runs[key], key[1], args.calls, rng)
    print(f"Python {sys.version.split()[0]}, {args.calls} sequential calls x {args.rounds} "
          "interleaved rounds\n")
    print("| path | to the upstream | p50 µs | p95 µs | gateway adds (p50) |")
    print("|---|---|---:|---:|---:|")
    for where in ("in process", "end to end"):
        direct = statistics.median(samples[(where, "direct")])
        for kind in ("direct", "gateway"):
            values = sorted(samples[(where, kind)])
            p50 = statistics.median(values)
            p95 = values[int(len(values) * 0.95)]
            added = f"{(p50 - direct) * 1e6:,.0f} µs" if kind == "gateway" else ""
            print(f"| {where} | {kind} | {p50 * 1e6:,.0f} | {p95 * 1e6:,.0f} | {added} |")


if __name__ == "__main__":
    main()
