"""Benchmark: what the trace gate costs one governed call.

One process, the same trivial ``add(a, b)`` through ``ToolInvoker.invoke`` with every default
gate, three ways, interleaved in batches (every way once per batch, in a shuffled order) so the
machine's load falls on all of them alike; the median of the batches is reported:

- without the trace gate (the pipeline before tracing: ``gates=`` the default minus it);
- with it and no SDK set up (what every user without OpenTelemetry runs);
- with it and the SDK recording every span into its in-memory exporter.

    python benchmarks/bench_tracing.py [--calls 2000] [--batches 60]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

import anyio
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolkeeper import ToolCall, ToolInvoker, tool
from toolkeeper.invoke import ChainPolicy


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def invokers() -> dict[str, ToolInvoker]:
    policy = ChainPolicy(max_tool_calls=10**9, total_timeout_s=10.0**9)
    untraced = ToolInvoker([add], policy=policy)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return {
        "without the trace gate": ToolInvoker(
            [add], policy=policy, gates=[g for g in untraced.gates if g.name != "trace"]),
        "trace gate, no SDK": untraced,
        "trace gate, SDK recording": ToolInvoker([add], policy=policy, tracer_provider=provider),
    }


async def batch(invoker: ToolInvoker, calls: int, seed: int) -> float:
    rng = random.Random(seed)
    async with invoker.open_session() as session:
        start = time.perf_counter()
        for i in range(calls):
            await invoker.invoke(ToolCall(id=f"c{i}", name="add", arguments={
                "a": rng.randrange(1000), "b": rng.randrange(1000)}), session=session)
        return (time.perf_counter() - start) / calls * 1e6


async def main_async(calls: int, batches: int) -> None:
    ways = invokers()
    samples: dict[str, list[float]] = {name: [] for name in ways}
    for invoker in ways.values():  # warm-up: each tool's chain is folded once
        await batch(invoker, 200, -1)
    for n in range(batches):
        order = list(ways)
        random.Random(n).shuffle(order)
        for name in order:
            samples[name].append(await batch(ways[name], calls, n))
    print(f"Python {sys.version.split()[0]}, {batches} interleaved batches of {calls} calls "
          "(median µs per call)\n")
    print("| door | µs per call |")
    print("|---|---:|")
    for name, values in samples.items():
        print(f"| {name} | {statistics.median(values):.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--batches", type=int, default=60)
    args = parser.parse_args()
    anyio.run(main_async, args.calls, args.batches)


if __name__ == "__main__":
    main()
