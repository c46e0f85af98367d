"""Benchmark: what keeping a session's stream events in the store costs per call
(``toolkeeper serve --sessions``; serve without ``--sessions`` keeps no events at all).

A call answered as an event stream on the 2025-11-25 wire stores two events — the priming event
(the cursor a broken stream resumes from) and the result — plus one per notification it sends
(progress, log lines). Each is one insert into the store, made from a worker thread as serve
makes it (``SessionEvents.store_event``). Measured for SQLite (the file ``--workers`` share,
WAL) and PostgreSQL (a throwaway local server, ``toolkeeper.testing.postgres``: fsync off,
loopback), one call after another and from 16 calls at once; then what a resume costs: the
replay of a stream of 10 events through the store.

    python benchmarks/bench_events.py [--calls 2000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import mcp_types as types
from mcp.server.streamable_http import EventMessage

from toolkeeper.mcp.streams import SessionEvents, StoredEvents
from toolkeeper.testing.postgres import create_database, postgres_server

RESULT = types.JSONRPCResponse(jsonrpc="2.0", id=1, result={
    "content": [{"type": "text", "text": "3"}], "isError": False})
PROGRESS = types.JSONRPCNotification(jsonrpc="2.0", method="notifications/progress",
                                     params={"progressToken": 1, "progress": 1})


async def _call(events: SessionEvents, stream: str) -> None:
    """The events one call stores: its priming event, then its result."""
    await events.store_event(stream, None)
    await events.store_event(stream, RESULT)


async def _sequential(stored: StoredEvents, calls: int) -> list[float]:
    events, took = SessionEvents(stored, "bench-one"), []
    for n in range(calls):
        start = time.perf_counter()
        await _call(events, str(n))
        took.append(time.perf_counter() - start)
    return took


async def _concurrent(stored: StoredEvents, calls: int, width: int = 16) -> float:
    """Calls per second from ``width`` sessions storing at once."""
    async def session(k: int) -> None:
        events = SessionEvents(stored, f"bench-{k}")
        for n in range(calls // width):
            await _call(events, str(n))

    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for k in range(width):
            group.start_soon(session, k)
    return (calls // width * width) / (time.perf_counter() - start)


async def _replay(stored: StoredEvents, rounds: int) -> float:
    """Median seconds to replay a finished stream of 10 events (a resume after a break)."""
    events = SessionEvents(stored, "bench-replay")
    first = await events.store_event("r", None)
    for _ in range(8):
        await events.store_event("r", PROGRESS)
    await events.store_event("r", RESULT)

    async def nothing(_event: EventMessage) -> None:
        return None

    took = []
    for _ in range(rounds):
        start = time.perf_counter()
        await events.replay_events_after(first, nothing)
        took.append(time.perf_counter() - start)
    return statistics.median(took)


async def _measure(target: str | Path, calls: int) -> dict[str, float]:
    stored = StoredEvents(target, alive=lambda _process: True)
    took = sorted(await _sequential(stored, calls))
    return {"p50": took[len(took) // 2], "p99": took[int(len(took) * 0.99)],
            "concurrent": await _concurrent(stored, calls),
            "replay": await _replay(stored, 200)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    with postgres_server() as base, tempfile.TemporaryDirectory() as tmp:
        lite = anyio.run(_measure, Path(tmp) / "store.db", args.calls)
        pg = anyio.run(_measure, create_database(base), args.calls)
    print(f"Python {sys.version.split()[0]}, {args.calls} calls per measurement")
    print("| a call's two events (priming + result) | SQLite | PostgreSQL |")
    print("|---|---:|---:|")
    for label, key, scale in (("one call after another, p50 µs", "p50", 1e6),
                              ("one call after another, p99 µs", "p99", 1e6),
                              ("replay of a 10-event stream, µs", "replay", 1e6)):
        print(f"| {label} | {lite[key] * scale:,.0f} | {pg[key] * scale:,.0f} |")
    print(f"| calls/s from 16 sessions at once | {lite['concurrent']:,.0f} | "
          f"{pg['concurrent']:,.0f} |")


if __name__ == "__main__":
    main()
