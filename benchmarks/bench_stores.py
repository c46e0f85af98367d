"""Benchmark: the shared state, SQLite against PostgreSQL, side by side in one run.

- approvals created per second, then decided per second (one at a time, random arguments);
- audit rows per second, from one writer and from 8 threads;
- decision → wake-up across processes: a waiting process (``PersistedApprovalHandler.wait``,
  as a replica's waiting call does) and a deciding process; the latency from the decision's
  timestamp to the waiter holding it. SQLite: polling every 50 ms (what ``toolkeeper serve``
  uses); PostgreSQL: LISTEN/NOTIFY with a re-read every second.

PostgreSQL is a throwaway local server (``toolkeeper.testing.postgres``: Debian's postgresql,
fsync off, loopback). Durations are medians over interleaved rounds.

    python benchmarks/bench_stores.py [--n 500] [--wakes 50]
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import anyio

from toolkeeper.approval import ApprovalDecision, PersistedApprovalHandler
from toolkeeper.approval.models import ApprovalRequest, args_digest
from toolkeeper.approval.store import PostgresApprovalStore, SqliteApprovalStore
from toolkeeper.core.risk import ToolRisk
from toolkeeper.invoke.audit import AuditEntry, PostgresAuditLog, SqliteAuditLog
from toolkeeper.testing.postgres import create_database, postgres_server


def _request(rng: random.Random, session: str = "bench") -> ApprovalRequest:
    arguments = {"amount": rng.randrange(10**6), "to": f"user{rng.randrange(10**6)}"}
    return ApprovalRequest(call_id="c", tool="wire_money", risk=ToolRisk.CRITICAL,
                           arguments=arguments, args_digest=args_digest(arguments),
                           session_id=session)


def _entry(rng: random.Random) -> AuditEntry:
    arguments = {"n": rng.randrange(10**9)}
    return AuditEntry(ts=time.time(), call_id="c", session_id="bench", tool="ping",
                      args_digest=args_digest(arguments), arguments=arguments, status="ok",
                      error_code=None, duration_ms=0.1)


def approvals_per_second(store: Any, n: int, rng: random.Random) -> tuple[float, float]:
    requests = [_request(rng) for _ in range(n)]
    start = time.perf_counter()
    for request in requests:
        store.create(request)
    created = n / (time.perf_counter() - start)
    start = time.perf_counter()
    for request in requests:
        store.decide(ApprovalDecision(request_id=request.id, outcome="approved"))
    return created, n / (time.perf_counter() - start)


def audit_per_second(log: Any, n: int, rng: random.Random, threads: int) -> float:
    entries = [_entry(rng) for _ in range(n)]
    chunks = [entries[i::threads] for i in range(threads)]

    def write(chunk: list[AuditEntry]) -> None:
        for entry in chunk:
            log.record(entry)

    workers = [threading.Thread(target=write, args=(c,)) for c in chunks]
    start = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return n / (time.perf_counter() - start)


def waiter(target: str, count: int) -> None:
    """The waiting process: for each request id read from stdin, wait for its decision and
    print how long after the decision it woke."""
    store = (PostgresApprovalStore(target) if target.startswith("postgresql://")
             else SqliteApprovalStore(target))
    handler = PersistedApprovalHandler(store, wait_s=30, poll_s=0.05)
    print("ready", flush=True)
    for _ in range(count):
        request_id = sys.stdin.readline().strip()
        decision = anyio.run(handler.wait, request_id, 30.0)
        print(f"{time.time() - decision.decided_at:.6f}", flush=True)


def wake_latencies(target: str, count: int, rng: random.Random) -> list[float]:
    store = (PostgresApprovalStore(target) if target.startswith("postgresql://")
             else SqliteApprovalStore(target))
    proc = subprocess.Popen([sys.executable, __file__, "--waiter", target, str(count)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    latencies = []
    for _ in range(count):
        request = _request(rng, session="wake")
        store.create(request)
        proc.stdin.write(request.id + "\n")
        proc.stdin.flush()
        time.sleep(rng.uniform(0.2, 0.4))  # the waiter is listening by now
        store.decide(ApprovalDecision(request_id=request.id, outcome="approved"))
        latencies.append(float(proc.stdout.readline()))
    proc.wait(timeout=30)
    return latencies


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--wakes", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--waiter", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.waiter:
        waiter(args.waiter[0], int(args.waiter[1]))
        return
    rows: dict[str, dict[str, list[float]]] = {"SQLite": {}, "PostgreSQL": {}}
    with postgres_server() as base, tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            order = ["SQLite", "PostgreSQL"]
            random.Random(round_).shuffle(order)
            for kind in order:
                rng = random.Random(round_ * 31 + len(kind))
                target = (create_database(base) if kind == "PostgreSQL"
                          else str(Path(tmp) / f"r{round_}.db"))
                store = (PostgresApprovalStore(target) if kind == "PostgreSQL"
                         else SqliteApprovalStore(target))
                log = PostgresAuditLog(target) if kind == "PostgreSQL" else SqliteAuditLog(target)
                created, decided = approvals_per_second(store, args.n, rng)
                measured = rows[kind]
                measured.setdefault("approvals created / s", []).append(created)
                measured.setdefault("approvals decided / s", []).append(decided)
                measured.setdefault("audit rows / s, 1 writer", []).append(
                    audit_per_second(log, args.n, rng, 1))
                measured.setdefault("audit rows / s, 8 threads", []).append(
                    audit_per_second(log, args.n, rng, 8))
        wakes = {kind: wake_latencies(create_database(base) if kind == "PostgreSQL"
                                      else str(Path(tmp) / "wake.db"), args.wakes,
                                      random.Random(7))
                 for kind in ("SQLite", "PostgreSQL")}
    print(f"Python {sys.version.split()[0]}, {args.n} operations per measurement, "
          f"{args.rounds} interleaved rounds (median)\n")
    print("| measurement | SQLite | PostgreSQL | PostgreSQL ÷ SQLite |")
    print("|---|---:|---:|---:|")
    for name in rows["SQLite"]:
        lite = statistics.median(rows["SQLite"][name])
        pg = statistics.median(rows["PostgreSQL"][name])
        print(f"| {name} | {lite:,.0f} | {pg:,.0f} | {pg / lite:.2f}x |")
    for q, label in ((0.5, "p50"), (0.95, "p95")):
        lite, pg = _pct(wakes["SQLite"], q), _pct(wakes["PostgreSQL"], q)
        print(f"| decision → wake in another process, {label} ms | {lite * 1000:,.1f} | "
              f"{pg * 1000:,.1f} | {pg / lite:.2f}x |")


if __name__ == "__main__":
    main()
