"""Benchmark: an audit row as the invoker writes it — ``SqliteAuditLog.record_async`` on the
event loop, waiting until the row is committed to a real SQLite file.

- one call at a time (what an agent's calls mostly are): the latency of each row, p50 and p99;
- 16 tasks writing at once (50 rows each): the process's CPU time per row and the wall time.

Each measurement runs in a fresh process; ``--before SRC`` runs the same in a process with the
code of another checkout's ``src`` folder ahead on ``PYTHONPATH``, the two taking turns in
the same rounds. ``--cpu N`` pins every process to core N (as ``toolkeeper serve`` is pinned in
bench_serve.py: the writer thread then shares its core with the event loop).

    python benchmarks/bench_audit.py [--rows 3000] [--rounds 5] [--before SRC] [--cpu N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from toolkeeper.invoke.audit import AuditEntry, SqliteAuditLog


def _entry(rng: random.Random, n: int) -> AuditEntry:
    return AuditEntry(ts=time.time(), call_id=f"c{n}", session_id="bench", tool="add",
                      args_digest=f"{rng.getrandbits(256):064x}",
                      arguments={"a": rng.randrange(10**6), "b": rng.randrange(1000)},
                      status="ok", error_code=None, duration_ms=0.1, approval_id=None,
                      decision=None, approver=None)


async def _measure(rows: int, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as scratch:
        log = SqliteAuditLog(Path(scratch) / "toolkeeper.db")
        times = []
        for n in range(rows):
            began = time.perf_counter()
            await log.record_async(_entry(rng, n))
            times.append(time.perf_counter() - began)
        times = sorted(times[rows // 6:])  # the first sixth warms up

        async def burst(k: int) -> None:
            for i in range(50):
                await log.record_async(_entry(rng, rows + k * 50 + i))

        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*(burst(k) for k in range(16)))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        log.close()
    return {"p50": statistics.median(times) * 1e6, "p99": times[int(len(times) * .99)] * 1e6,
            "cpu": cpu / 800 * 1e6, "wall": wall / 800 * 1e6}


def _run(src: str | None, rows: int, seed: int, cpu: int | None) -> dict[str, float]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src
    pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
    done = subprocess.run([*pin, sys.executable, __file__, "--one", str(rows), str(seed)],
                          capture_output=True, text=True, check=True, env=env)
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", metavar="SRC", help="also run this src folder's code")
    parser.add_argument("--cpu", type=int, help="pin every process to this core")
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(asyncio.run(_measure(int(args.one[0]), int(args.one[1])))))
        return
    kinds: dict[str, str | None] = {"now": None}
    if args.before:
        kinds["before"] = args.before
    samples: dict[str, list[dict[str, float]]] = {kind: [] for kind in kinds}
    for round_ in range(args.rounds):
        order = list(kinds)
        random.Random(round_).shuffle(order)
        for kind in order:
            samples[kind].append(_run(kinds[kind], args.rows, round_, args.cpu))
    print(f"{time.strftime('%Y-%m-%d')}, Python {sys.version.split()[0]}, {args.rows} rows one "
          f"at a time and 16 × 50 at once per process, {args.rounds} rounds (median of the "
          f"rounds), {'core ' + str(args.cpu) if args.cpu is not None else 'not pinned'}, "
          f"load average {os.getloadavg()[0]:.1f}\n")
    print("| code | one at a time: p50 µs | p99 µs | 16 at once: CPU µs a row | wall µs a row |")
    print("|---|---:|---:|---:|---:|")
    for kind, runs in samples.items():
        med = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        print(f"| {kind} | {med['p50']:.0f} | {med['p99']:.0f} | {med['cpu']:.1f} | "
              f"{med['wall']:.1f} |")


if __name__ == "__main__":
    main()
