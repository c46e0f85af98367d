"""Benchmark: the shared rate limit's cost per request in one worker — a store write per
request (what ``serve --workers N`` did before batching: ``SharedBuckets.admit`` in a thread)
against ``Leases`` (a batch of tokens per store write, spent in memory).

One event loop, ``--concurrency`` requests of one client at once (as a worker's share of
``wrk -c16`` over two workers), ``--requests`` in all, a SQLite store in a temporary folder,
the limit high enough to admit every request (``rate`` 1,000,000, as ``--rate-limit
1000000``). Rounds alternate the two ways; each figure is the median over the rounds: the
latency of one admission (p50, p99), the CPU time per request and the store writes per
request.

    python benchmarks/bench_rate_buckets.py [--rounds 5] [--requests 4000] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import anyio.to_thread

from toolkeeper.server.rate_buckets import Leases, SharedBuckets, batch_for

RATE, BURST, WORKERS = 1_000_000.0, 2_000_000, 2
CALLER = "client 'agent'"


async def measure(admit: Callable[[str], Awaitable[bool]], requests: int,
                  concurrency: int) -> tuple[list[float], float]:
    """Each admission's seconds, and the CPU seconds of them all."""
    latencies: list[float] = []

    async def ask() -> None:
        for _ in range(requests // concurrency):
            begun = time.perf_counter()
            if not await admit(CALLER):
                raise SystemExit("refused: the limit is meant to admit every request")
            latencies.append(time.perf_counter() - begun)

    cpu = time.process_time()
    async with anyio.create_task_group() as group:
        for _ in range(concurrency):
            group.start_soon(ask)
    return latencies, time.process_time() - cpu


def _counted(buckets: SharedBuckets) -> list[int]:
    writes = [0]
    take = buckets.take

    def counted(caller: str, want: int = 1) -> int:
        writes[0] += 1
        return take(caller, want)

    buckets.take = counted  # type: ignore[method-assign]
    return writes


def one_round(way: str, scratch: Path, args: argparse.Namespace) -> tuple[float, float, float,
                                                                          float]:
    """(p50 µs, p99 µs, CPU µs per request, store writes per request) of one way."""
    batch = batch_for(BURST, WORKERS)
    store = str(Path(tempfile.mkdtemp(dir=scratch)) / "toolkeeper.db")
    if way == "a store write per request":
        buckets = SharedBuckets(store, rate=RATE, burst=BURST)
        writes = _counted(buckets)

        async def admit(caller: str) -> bool:
            return await anyio.to_thread.run_sync(buckets.admit, caller)
    else:
        buckets = SharedBuckets(store, rate=RATE, burst=BURST, held=WORKERS * (batch - 1))
        writes = _counted(buckets)
        admit = Leases(buckets, batch=batch).admit
    latencies, cpu = anyio.run(measure, admit, args.requests, args.concurrency)
    latencies.sort()
    done = len(latencies)
    return (latencies[done // 2] * 1e6, latencies[int(done * 0.99) - 1] * 1e6,
            cpu / done * 1e6, writes[0] / done)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    ways = ("a store write per request", f"Leases, batches of {batch_for(BURST, WORKERS)}")
    figures: dict[str, list[tuple[float, float, float, float]]] = {way: [] for way in ways}
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as scratch:
        for round_ in range(args.rounds):
            for way in ways if round_ % 2 == 0 else reversed(ways):
                figures[way].append(one_round(way, Path(scratch), args))
    print(f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, Python "
          f"{sys.version.split()[0]}, {os.cpu_count()} cores, load average {load:.2f} at the "
          f"start and {os.getloadavg()[0]:.2f} at the end; {args.requests} requests, "
          f"{args.concurrency} at once, {args.rounds} alternating rounds (median)\n")
    print("| way | p50 µs | p99 µs | CPU µs per request | store writes per request |")
    print("|---|---:|---:|---:|---:|")
    medians = {}
    for way in ways:
        medians[way] = [statistics.median(run[k] for run in figures[way]) for k in range(4)]
        p50, p99, cpu, writes = medians[way]
        print(f"| {way} | {p50:,.1f} | {p99:,.1f} | {cpu:,.1f} | {writes:.3f} |")
    before, now = medians[ways[0]], medians[ways[1]]
    print(f"\n- batched ÷ per request: p50 {now[0] / before[0]:.4f}x, p99 {now[1] / before[1]:.3f}x, "
          f"CPU {now[2] / before[2]:.2f}x, store writes {now[3] / before[3]:.3f}x")


if __name__ == "__main__":
    main()
