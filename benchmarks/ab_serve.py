"""A/B: CPU per call of ``toolkeeper serve`` run from two source trees, taking turns.

Each run starts serve as ``bench_serve.py`` does (SQLite audit and auth on, rate limit off)
with ``PYTHONPATH`` set to one tree's ``src``, pinned to ``--serve-cpu``; ``wrk -t1 -c16``
(``bench_serve.lua``, every answer checked) on ``--load-cpu`` warms it for a second, then runs
``--duration`` seconds. CPU is the serve process's utime + stime from ``/proc/PID/stat``
over that run, divided by the calls answered. Pairs alternate which tree goes first.

    python benchmarks/ab_serve.py OLD/src NEW/src [--pairs 3] [--duration 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

from bench_serve import _RESULT, LUA, TOOLS
from cputime import CLOCK_TICKS, cpu_ticks
from served import start_serve, stop

__all__ = ["run"]


def _wrk(url: str, token: str, seconds: int, cpu: int) -> str:
    return subprocess.run(["taskset", "-c", str(cpu), "wrk", "-t1", "-c16", f"-d{seconds}s",
                           "--timeout", "10s", "-s", str(LUA), url, "--", token],
                          capture_output=True, text=True, check=False).stdout


def run(src: str, seconds: int, serve_cpu: int = 1, load_cpu: int = 0) -> tuple[float, float]:
    """(CPU µs per call, calls/s) of one serve from ``src`` under ``seconds`` of load."""
    scratch = Path(tempfile.mkdtemp())
    (scratch / "tools.py").write_text(TOOLS)
    (scratch / "state").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "TOOLKEEPER_TOKEN"}
    env["PYTHONPATH"] = src
    proc, url, token = start_serve(scratch / "tools.py", scratch / "state", cpu=serve_cpu,
                                   env=env)
    try:
        _wrk(url + "/mcp", token, 1, load_cpu)  # warm up
        before = cpu_ticks(proc.pid)
        out = _wrk(url + "/mcp", token, seconds, load_cpu)
        used = cpu_ticks(proc.pid) - before
    finally:
        stop(proc)
    found = _RESULT.search(out)
    if found is None:
        raise SystemExit(f"wrk gave no result: {out}")
    _, answered, wrong, errors, _, _, duration = map(int, found.groups())
    if wrong or errors:
        raise SystemExit(f"{wrong} wrong answers, {errors} errors: {out}")
    return used / CLOCK_TICKS / answered * 1e6, answered / (duration / 1e6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5)
    args = parser.parse_args()
    seen: dict[str, list[tuple[float, float]]] = {"old": [], "new": []}
    for i in range(args.pairs):
        order = [("old", args.old), ("new", args.new)]
        for name, src in order if i % 2 == 0 else order[::-1]:
            us, rate = run(src, args.duration)
            seen[name].append((us, rate))
            print(f"pair {i} {name}: {us:.1f} µs/call, {rate:.0f} calls/s", flush=True)
    for name, runs in seen.items():
        print(f"{name}: median {statistics.median(u for u, _ in runs):.1f} µs/call, "
              f"{statistics.median(r for _, r in runs):.0f} calls/s")


if __name__ == "__main__":
    main()
