"""Benchmark: a soak of ``toolkeeper serve`` at half its capacity — every answer checked, zero
errors, memory flat, and one audit row per call.

The real command (``python -m toolkeeper.cli serve tools.py``, the ``add`` tool of
``bench_serve.py``) as users run it: SQLite audit on, auth on (the client token serve makes on
first start), every call through the invoker's door; only the rate limit is off
(``--rate-limit 0``). The server is pinned to one core and ``wrk`` (one thread, its Lua script
``bench_soak.lua``) to the other, so the load generator is never the bottleneck.

1. **Capacity**, in the same run and on the same server: after a short warm-up, ``wrk`` posts
   ``tools/call``s as fast as serve answers over ``--connections`` kept-alive connections for
   ``--capacity-seconds``.
2. **The soak**: ``--fraction`` (half) of that capacity for ``--minutes``, the calls spaced on
   one schedule (the Lua script paces them with the monotonic clock), over the same number of
   connections. The server's resident memory (its process and any children) is sampled every
   ``--every`` seconds; the report gives the first and last sample and the slope of a
   least-squares line through all of them, in KB per minute.

Every answer of every phase is checked by the Lua script (status 200, the JSON-RPC id it sent,
``structuredContent`` equal to a + b); each phase stops sending at its end and waits for the
calls in flight, so every call sent is answered and counted. At the end the audit rows of the
``add`` tool in serve's SQLite file are counted: one per call made, over all phases.

The run fails (exit status 1) on a wrong or failed answer, a transport error, or an audit count
other than the calls made; the memory figures are reported, not judged.

    python benchmarks/bench_soak.py [--minutes 30] [--capacity-seconds 15] [--every 5]
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import os
import platform
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from served import start_serve, stop

HERE = Path(__file__).resolve().parent
LUA = HERE / "bench_soak.lua"
TOOLS = '''
from toolkeeper import tool


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''
TIMEOUT_S = 10  # a call unanswered this long is an error
GRACE_S = 60  # the most wrk runs past a phase's window (it is ended once the calls are in)
_RESULT = re.compile(r"RESULT sent=(\d+) answered=(\d+) wrong=(\d+) not_ok=(\d+) errors=(\d+) "
                     r"p50_us=(\d+) p99_us=(\d+) p999_us=(\d+) max_us=(\d+) window_us=(\d+)")


@dataclass
class Serve:
    """A running ``toolkeeper serve`` pinned to ``cpu``, its state in ``state``."""

    proc: subprocess.Popen[str]
    url: str
    token: str
    db: Path

    @classmethod
    def start(cls, cpu: int, scratch: Path) -> Serve:
        (scratch / "tools.py").write_text(TOOLS)
        proc, url, token = start_serve(scratch / "tools.py", scratch, cpu=cpu)
        return cls(proc, url + "/mcp", token, scratch / "state" / "toolkeeper.db")

    def stop(self) -> None:
        stop(self.proc, 60)


@dataclass
class Phase:
    """What ``wrk`` saw in one phase."""

    sent: int
    answered: int
    wrong: int
    not_ok: int
    errors: int
    p50_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    window_s: float

    @property
    def rate(self) -> float:
        return self.answered / self.window_s if self.window_s else 0.0

    @property
    def failed(self) -> int:
        return self.wrong + self.errors + (self.sent - self.answered)


def load(serve: Serve, connections: int, rate: float, seconds: float, cpu: int) -> Phase:
    """``wrk`` at ``rate`` calls/s (0: as fast as serve answers) for ``seconds``; ended as soon
    as the Lua script says every call it sent is answered."""
    command = ["taskset", "-c", str(cpu), "wrk", "-t1", f"-c{connections}",
               f"-d{round(seconds) + GRACE_S}s", "--timeout", f"{TIMEOUT_S}s", "-s", str(LUA),
               serve.url, "--", serve.token, f"{rate:.3f}", f"{seconds:g}"]
    wrk = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(seconds + GRACE_S + 120, wrk.kill)
    watchdog.start()
    try:
        assert wrk.stdout is not None
        lines = []
        for line in wrk.stdout:
            lines.append(line)
            if line.startswith("WRONG"):
                print(f"wrk: {line.strip()}", file=sys.stderr, flush=True)
            if line.startswith("DRAINED"):
                wrk.send_signal(signal.SIGINT)  # wrk prints its summary and exits
        wrk.wait()
    finally:
        watchdog.cancel()
    found = _RESULT.search("".join(lines))
    if found is None:
        raise SystemExit(f"wrk gave no result: {''.join(lines)} {wrk.stderr.read() if wrk.stderr else ''}")
    sent, answered, wrong, not_ok, errors, *micro = map(int, found.groups())
    p50, p99, p999, most, window = (value / 1000 for value in micro)
    if sent != answered or errors:
        print("wrk: " + "wrk: ".join(line for line in lines if line.startswith(("RESULT",
              "ERRORS"))), file=sys.stderr, flush=True)
    return Phase(sent, answered, wrong, not_ok, errors, p50, p99, p999, most, window / 1000)


@dataclass
class Sampler:
    """The resident memory (KB) of a process and its children, and the load average, every
    ``every`` seconds on a thread of its own, for ``until`` seconds or until stopped."""

    pid: int
    every: float
    until: float
    samples: list[tuple[float, int, float]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Sampler:
        began = time.monotonic()

        def run() -> None:
            while (elapsed := time.monotonic() - began) <= self.until:
                self.samples.append((elapsed, tree_rss_kb(self.pid), os.getloadavg()[0]))
                if self._stop.wait(self.every):
                    return

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join()


def tree_rss_kb(pid: int) -> int:
    """VmRSS of ``pid`` and its descendants, in KB (0 for a process gone)."""
    total = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except (FileNotFoundError, ProcessLookupError):
        return total
    return total + sum(tree_rss_kb(int(child)) for child in children)


def audit_rows(db: Path) -> dict[str, int]:
    """Rows of the ``add`` tool in serve's audit, by status."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        rows = conn.execute("SELECT status, count(*) FROM audit WHERE tool = 'add' "
                            "GROUP BY status").fetchall()
    return {str(status): int(count) for status, count in rows}


def slope_kb_per_min(samples: list[tuple[float, int, float]]) -> float:
    """The least-squares slope of RSS over time, KB per minute."""
    if len(samples) < 2:
        return 0.0
    minutes = [t / 60 for t, _, _ in samples]
    return statistics.linear_regression(minutes, [float(kb) for _, kb, _ in samples]).slope


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in
                  Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor() or "unknown CPU")
    versions = ", ".join(f"{name} {importlib.metadata.version(name)}"
                         for name in ("mcp", "uvicorn"))
    return (f"{platform.system()} {platform.release()}, {os.cpu_count()} cores ({model}), "
            f"Python {sys.version.split()[0]}, {versions}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30, help="length of the soak")
    parser.add_argument("--capacity-seconds", type=float, default=15)
    parser.add_argument("--fraction", type=float, default=0.5, help="of capacity, in the soak")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--every", type=float, default=5, help="seconds between RSS samples")
    parser.add_argument("--server-cpu", type=int, default=1)
    parser.add_argument("--load-cpu", type=int, default=0)
    args = parser.parse_args()
    for command in ("wrk", "taskset"):
        if shutil.which(command) is None:
            raise SystemExit(f"{command} is missing: make bench installs it (Debian package "
                             f"{'wrk' if command == 'wrk' else 'util-linux'})")
    began = datetime.datetime.now(datetime.UTC)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as scratch:
        serve = Serve.start(args.server_cpu, Path(scratch))
        try:
            phases = run(serve, args)
            rows = audit_rows(serve.db)
        finally:
            serve.stop()
    report(began, load_before, phases, rows, args)


def run(serve: Serve, args: argparse.Namespace) -> dict[str, Phase | Sampler]:
    warm = load(serve, args.connections, 0, 3, args.load_cpu)
    capacity = load(serve, args.connections, 0, args.capacity_seconds, args.load_cpu)
    print(f"capacity {capacity.rate:,.0f} calls/s; soaking at {args.fraction:g} of it for "
          f"{args.minutes:g} min", file=sys.stderr, flush=True)
    with Sampler(serve.proc.pid, args.every, args.minutes * 60) as sampler:
        soak = load(serve, args.connections, capacity.rate * args.fraction, args.minutes * 60,
                    args.load_cpu)
    return {"warm-up": warm, "capacity": capacity, "soak": soak, "rss": sampler}


def report(began: datetime.datetime, load_before: float, phases: dict[str, Phase | Sampler],
           rows: dict[str, int], args: argparse.Namespace) -> None:
    calls = [p for p in phases.values() if isinstance(p, Phase)]
    capacity, soak, sampler = phases["capacity"], phases["soak"], phases["rss"]
    assert isinstance(capacity, Phase) and isinstance(soak, Phase)
    assert isinstance(sampler, Sampler)
    samples = sampler.samples
    loads = [load for _, _, load in samples] or [0.0]
    made = sum(p.sent for p in calls)
    failed = sum(p.failed for p in calls)
    recorded = sum(rows.values())
    half = samples[len(samples) // 2:]
    print(f"{began:%Y-%m-%d %H:%M} UTC; {machine()}; serve on cpu {args.server_cpu}, wrk -t1 "
          f"-c{args.connections} on cpu {args.load_cpu}; load average {load_before:.2f} at the "
          f"start, {min(loads):.2f}–{max(loads):.2f} during the soak, "
          f"{os.getloadavg()[0]:.2f} at the end\n")
    print("| phase | calls/s | calls | wrong or failed | p50 ms | p99 ms | p99.9 ms | max ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, phase in phases.items():
        if isinstance(phase, Phase):
            print(f"| {name} | {phase.rate:,.0f} | {phase.answered:,} | {phase.failed} | "
                  f"{phase.p50_ms:.2f} | {phase.p99_ms:.2f} | {phase.p999_ms:.2f} | "
                  f"{phase.max_ms:.1f} |")
    print(f"\n- the soak: {soak.window_s / 60:.1f} min at {soak.rate:,.0f} calls/s = "
          f"{soak.rate / capacity.rate:.2f}x the capacity measured ({capacity.rate:,.0f} "
          f"calls/s); every answer checked: {made:,} calls made, {failed} wrong or failed "
          f"(status other than 200: {sum(p.not_ok for p in calls)}, transport errors and "
          f"timeouts: {sum(p.errors for p in calls)})")
    if samples:
        print(f"- serve's RSS, {len(samples)} samples every {args.every:g} s: first "
              f"{samples[0][1] / 1024:.1f} MB, last {samples[-1][1] / 1024:.1f} MB, min "
              f"{min(kb for _, kb, _ in samples) / 1024:.1f} MB, max "
              f"{max(kb for _, kb, _ in samples) / 1024:.1f} MB; least-squares slope "
              f"{slope_kb_per_min(samples):+.1f} KB/min over the soak, "
              f"{slope_kb_per_min(half):+.1f} KB/min over its second half")
    statuses = ", ".join(f"{status} {count:,}" for status, count in rows.items())
    print(f"- audit rows of the tool: {recorded:,} ({statuses}), calls made {made:,}: "
          f"{'equal' if recorded == made else 'NOT EQUAL'}")
    if failed or recorded != made:
        raise SystemExit(f"{failed} wrong or failed answers; {recorded} audit rows for "
                         f"{made} calls")


if __name__ == "__main__":
    main()
