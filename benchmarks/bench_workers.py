"""Benchmark: ``toolkeeper serve --workers N`` — calls/s for 1 and 2 workers (and per worker)
beside FastMCP in its multi-worker setup with the same N, what the rate limit counted in the
store costs, and how soon a decision wakes a call waiting in another worker.

- **capacity**: the real command (SQLite audit on, auth on, the ``add`` tool of
  ``bench_serve.py``) with ``--workers N`` for each N of ``--workers`` (default ``1,2``: the
  scaling curve; give ``1,2,4,8`` on a machine that has the cores); ``wrk`` (one thread, the
  Lua script of ``bench_serve.py`` checking every answer) posts ``tools/call``s over 16
  kept-alive connections for ``--duration`` seconds. Nothing is pinned: the workers and
  ``wrk`` share the machine's cores, as they would on a small host, so the figures say what N
  workers give *with the load generator beside them*. ``--rate-limit 0`` (no counting) and,
  for the largest N, a limit too high to refuse anything (``--rate-limit 1000000``: every
  request counted in the store, which is the cost measured).
- **FastMCP with the same N**, as its deployment docs set it up for several workers: the ASGI
  app of ``mcp.http_app(stateless_http=True)`` (the same ``add``) under ``uvicorn --workers
  N``, the same ``wrk`` load, interleaved with serve's runs. With ``--postgres``, the same for one process on a
  PostgreSQL store (a throwaway local server, a fresh database per run), as a replica runs:
  there the rate limit is counted in the store whatever the number of workers.
- **decision to wake**: ``--workers 2`` and a tool that needs approval; a call is sent on a
  connection that landed on worker 1 and, once its request is stored, approved through a
  connection that landed on worker 2. The figure is the time from the decision's answer to the
  call's answer (the wake-up, the tool and the answer), over ``--approvals`` calls.

- **before and after**: with ``--before SRC`` (another checkout's ``src`` folder), the
  largest N uncounted and counted also run from that checkout, interleaved with this one's.

Rounds are interleaved; each figure is the median over the rounds (calls/s, and wrk's p50 and
p99 latency).

    python benchmarks/bench_workers.py [--rounds 3] [--duration 5] [--approvals 40] [--postgres]
        [--before OTHER/src]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import httpx
from bench_serve import _RESULT, LUA
from served import free_port, start_serve

from toolkeeper.testing.postgres import create_database, postgres_server

TOKEN = "bench-operator-token-0123456789"
TOOLS = '''
from toolkeeper import ToolRisk, tool


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(risk=ToolRisk.CRITICAL)
def launch(n: int) -> str:
    """Launch run n: a person decides."""
    return f"launched {n}"
'''
FASTMCP_APP = '''
from fastmcp import FastMCP

mcp = FastMCP("bench")


@mcp.tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


app = mcp.http_app(path="/mcp", stateless_http=True)
'''
PG_RUNS = (("1 worker, PostgreSQL store", 1, "0"),
           ("1 worker, PostgreSQL store, rate limit counted", 1, "1000000"))


def runs(counts: list[int], before: bool = False) -> tuple[tuple[str, int, str], ...]:
    """(name, workers, rate limit) of each capacity run: serve and FastMCP for every N, and
    serve counting the rate limit in the store for the largest N (and, with ``before``, the
    largest N's two runs of the other checkout)."""
    most = max(counts)
    return (*((f"serve, {_workers(n)}", n, "0") for n in counts),
            (f"serve, {_workers(most)}, rate limit counted", most, "1000000"),
            *(((f"{BEFORE}serve, {_workers(most)}", most, "0"),
               (f"{BEFORE}serve, {_workers(most)}, rate limit counted", most, "1000000"))
              if before else ()),
            *((f"FastMCP, {_workers(n)} (uvicorn --workers {n})", n, "") for n in counts))


BEFORE = "before: "
"""The name's prefix of a run of the ``--before`` checkout."""


def _workers(n: int) -> str:
    return f"{n} worker{'s' if n > 1 else ''}"


class Serve:
    """A running ``toolkeeper serve --workers N``."""

    def __init__(self, scratch: Path, workers: int, rate_limit: str, *args: str,
                 src: str | None = None) -> None:
        state = Path(tempfile.mkdtemp(dir=scratch))
        (scratch / "tools.py").write_text(TOOLS)
        env = {**os.environ, "TOOLKEEPER_TOKEN": TOKEN}
        if src is not None:  # another checkout's package first on the path
            env["PYTHONPATH"] = src
        self.proc, self.url, self.token = start_serve(
            scratch / "tools.py", state, env=env,
            args=("--rate-limit", rate_limit, "--workers", str(workers), *args))

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)

    def on(self, worker: int, token: str) -> httpx.Client:
        """A kept-alive connection that landed on ``worker``."""
        for _ in range(500):
            client = httpx.Client(base_url=self.url, timeout=60)
            if client.get("/healthz").headers.get("toolkeeper-worker", "1") == str(worker):
                client.headers["Authorization"] = f"Bearer {token}"
                return client
            client.close()
        raise SystemExit(f"no connection landed on worker {worker}")


class FastMCPWorkers(Serve):
    """FastMCP's ASGI app under ``uvicorn --workers N`` (no auth: ``token`` is empty)."""

    def __init__(self, scratch: Path, workers: int) -> None:
        (scratch / "fastmcp_app.py").write_text(FASTMCP_APP)
        port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "fastmcp_app:app", "--app-dir", str(scratch),
             "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers),
             "--log-level", "warning"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            text=True, start_new_session=True)
        self.url, self.token = f"http://127.0.0.1:{port}", ""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # every worker up: each answers a request
            try:
                if _answers(self, workers):
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.stop()
        raise SystemExit("FastMCP under uvicorn did not start")

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)  # uvicorn's supervisor and its workers
        self.proc.wait(timeout=30)


def _answers(server: Serve, workers: int) -> bool:
    """Whether ``workers`` fresh connections in a row get an MCP answer."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}
    for _ in range(workers * 4):
        with httpx.Client(base_url=server.url, timeout=10) as client:
            if client.post("/mcp", json=body, headers={
                    "Accept": "application/json, text/event-stream",
                    "MCP-Protocol-Version": "2025-11-25"}).status_code != 200:
                return False
    return True


def capacity(serve: Serve, seconds: float) -> tuple[float, int, float, float]:
    """wrk over 16 connections: (calls/s, wrong or failed answers, p50 ms, p99 ms)."""
    done = subprocess.run(["wrk", "-t1", "-c16", f"-d{round(seconds)}s", "--timeout", "10s",
                           "-s", str(LUA), f"{serve.url}/mcp", "--", serve.token],
                          capture_output=True, text=True, timeout=seconds + 60, check=False)
    found = _RESULT.search(done.stdout)
    if found is None:
        raise SystemExit(f"wrk gave no result: {done.stdout} {done.stderr}")
    requests, answered, wrong, errors, p50, p99, duration = map(int, found.groups())
    return (answered / (duration / 1e6), wrong + errors + (requests - answered), p50 / 1e3,
            p99 / 1e3)


def wake(serve: Serve, approvals: int) -> list[float]:
    """Seconds from each decision's answer (on worker 2) to its call's answer (worker 1)."""
    caller, operator = serve.on(1, serve.token), serve.on(2, TOKEN)
    times = []
    for n in range(approvals):
        answered: list[float] = []
        body = {"jsonrpc": "2.0", "id": n, "method": "tools/call",
                "params": {"name": "launch", "arguments": {"n": n}}}
        call = threading.Thread(target=lambda b=body, got=answered: (caller.post(
            "/mcp", json=b, headers={"Accept": "application/json, text/event-stream"}),
            got.append(time.perf_counter())))
        call.start()
        pending = _until(lambda: operator.get("/api/approvals?state=pending").json()[
            "approvals"])
        operator.post(f"/api/approvals/{pending[0]['id']}/decision",
                      json={"decision": "approve"}).raise_for_status()
        decided = time.perf_counter()
        call.join(timeout=60)
        times.append(answered[0] - decided)
    return times


def _until(seen: Callable[[], list[dict[str, object]]]) -> list[dict[str, object]]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = seen()
        if found:
            return found
        time.sleep(0.01)
    raise SystemExit("a call's request was never stored")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5, help="seconds per wrk run")
    parser.add_argument("--approvals", type=int, default=40, help="decisions timed per round")
    parser.add_argument("--postgres", action="store_true",
                        help="also one process on a PostgreSQL store (a local throwaway server)")
    parser.add_argument("--workers", default="1,2",
                        help="the worker counts measured, e.g. 1,2,4,8 where the cores exist")
    parser.add_argument("--before", metavar="SRC",
                        help="another checkout's src folder: its serve with the most workers, "
                             "uncounted and counted, interleaved with this one's")
    args = parser.parse_args()
    args.counts = sorted({int(n) for n in args.workers.split(",")})
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is missing: make bench installs it (Debian package wrk)")
    rates: dict[str, list[tuple[float, float, float]]] = {}
    wakes: list[float] = []
    wrong = 0
    every = runs(args.counts, bool(args.before)) + (PG_RUNS if args.postgres else ())
    with tempfile.TemporaryDirectory() as scratch, _postgres(args.postgres) as base:
        for round_ in range(args.rounds):
            order = list(every)
            random.Random(round_).shuffle(order)
            for name, workers, limit in order:
                store = ("--store", create_database(base)) if "PostgreSQL" in name else ()
                src = args.before if name.startswith(BEFORE) else None
                serve = (FastMCPWorkers(Path(scratch), workers) if name.startswith("FastMCP")
                         else Serve(Path(scratch), workers, limit, *store, src=src))
                try:
                    capacity(serve, 1.0)  # warm up
                    rate, bad, p50, p99 = capacity(serve, args.duration)
                    rates.setdefault(name, []).append((rate, p50, p99))
                    wrong += bad
                finally:
                    serve.stop()
            serve = Serve(Path(scratch), 2, "0", "--approval-wait", "30")
            try:
                wakes += wake(serve, args.approvals)
            finally:
                serve.stop()
            print(f"round {round_ + 1} done", file=sys.stderr, flush=True)
    report(rates, sorted(wakes), wrong, args)


def _median(rates: dict[str, list[tuple[float, float, float]]], name: str) -> float:
    """The median calls/s of the runs named ``name``."""
    return statistics.median(run[0] for run in rates[name])


@contextmanager
def _postgres(wanted: bool) -> Iterator[str]:
    """A throwaway PostgreSQL server's base URL when ``wanted``."""
    with postgres_server() if wanted else nullcontext("") as base:
        yield base


def report(rates: dict[str, list[tuple[float, float, float]]], wakes: list[float], wrong: int,
           args: argparse.Namespace) -> None:
    print(f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; {platform.system()} "
          f"{platform.release()}, Python {sys.version.split()[0]}, {os.cpu_count()} cores "
          f"(workers and wrk share them), load average {os.getloadavg()[0]:.2f} at the end; wrk -t1 -c16 for "
          f"{args.duration:g} s per run, {args.rounds} interleaved rounds (median); wrong "
          f"answers: {wrong}\n")
    print("| run | calls/s | calls/s per worker | p50 ms | p99 ms |")
    print("|---|---:|---:|---:|---:|")
    for name, workers, _ in runs(args.counts, bool(args.before)) + (
            PG_RUNS if args.postgres else ()):
        rate, p50, p99 = (statistics.median(run[k] for run in rates[name]) for k in range(3))
        print(f"| {name} | {rate:,.0f} | {rate / workers:,.0f} | {p50:.2f} | {p99:.2f} |")
    print()
    one = _median(rates, f"serve, {_workers(args.counts[0])}")
    for n in args.counts:
        ours = _median(rates, f"serve, {_workers(n)}")
        theirs = _median(rates, f"FastMCP, {_workers(n)} (uvicorn --workers {n})")
        print(f"- {_workers(n)}: serve ÷ FastMCP {ours / theirs:.2f}x; serve's scaling "
              f"{ours / one:.2f}x its {_workers(args.counts[0])} ({ours / n:,.0f} calls/s per "
              f"worker)")
    most = _workers(max(args.counts))
    counted = _median(rates, f"serve, {most}, rate limit counted")
    print(f"- {most}, rate limit counted: {counted / _median(rates, f'serve, {most}'):.2f}x "
          f"uncounted")
    if args.before:
        was = _median(rates, f"{BEFORE}serve, {most}, rate limit counted")
        print(f"- before: counted {was / _median(rates, f'{BEFORE}serve, {most}'):.2f}x "
              f"uncounted; counted now {counted / was:.2f}x before")
    if max(args.counts) > (os.cpu_count() or 1):
        print(f"- {os.cpu_count()} cores here: the runs with more workers than cores say what "
              f"the processes cost when they share the cores, not how serve scales on a "
              f"machine that has them")
    p50, p95 = statistics.median(wakes), wakes[int(len(wakes) * 0.95) - 1]
    print(f"\ndecision to wake, the call in worker 1 approved through worker 2 "
          f"({len(wakes)} decisions): p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, "
          f"max {wakes[-1] * 1000:.0f} ms")
    if wrong:
        raise SystemExit(f"{wrong} wrong or failed answers")


if __name__ == "__main__":
    main()
