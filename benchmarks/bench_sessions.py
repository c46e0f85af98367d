"""Benchmark: what a new MCP session costs — the time for the official client to open one and
make its first call, ``toolkeeper serve`` beside the bare SDK server, in both eras.

- **2025-11-25** (the client's ``mode="legacy"``): ``initialize``, ``notifications/
  initialized``, then ``tools/call``. Against ``toolkeeper serve`` as shipped (stateless) and
  with ``--sessions`` (a session per client, ``Mcp-Session-Id``), and against the bare SDK
  server stateless (answering as an event stream, its default, and as one JSON body) and with
  sessions (the SDK's default, stateful Streamable HTTP).
- **2026-07-28** (``mode="auto"``): the discovery round (``server/discover``), then
  ``tools/call``. Against ``toolkeeper serve`` and the bare SDK server (stateless, both
  answer modes).

``toolkeeper serve`` is the real command (SQLite audit on, auth on, ``--rate-limit 0``, the
``add`` tool of ``bench_serve.py``); the bare SDK server is ``bench_mcp.py``'s low-level
``Server`` with the same tool. Each server is pinned to one core, the client to the other. The
client opens ``--sessions-per-round`` sessions one after another, each a new ``Client`` over
one kept-alive HTTP connection (so the figure is the protocol's cost, not TCP's), checks its
first call's answer and closes it (a session's ``DELETE`` is not in the time). Rounds are
interleaved (every server once per round, shuffled); the p50 and p99 are over every session of
every round, and sessions/s is how many the one client opened, called and closed per second.

    python benchmarks/bench_sessions.py [--rounds 3] [--sessions-per-round 200]
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench_mcp import bare_server  # the same SDK server bench_serve.py measures
from served import free_port, start_serve, stop, until_listening

TOOLS = '''
from toolkeeper import tool


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''
# (name, era, server kind, the client's mode)
RUNS = (
    ("serve", "2025-11-25", "serve", "legacy"),
    ("serve --sessions", "2025-11-25", "serve --sessions", "legacy"),
    ("bare SDK, stateless (SSE)", "2025-11-25", "SDK stateless SSE", "legacy"),
    ("bare SDK, stateless (JSON)", "2025-11-25", "SDK stateless JSON", "legacy"),
    ("bare SDK, sessions", "2025-11-25", "SDK sessions", "legacy"),
    ("serve", "2026-07-28", "serve", "auto"),
    ("bare SDK (SSE)", "2026-07-28", "SDK stateless SSE", "auto"),
    ("bare SDK (JSON)", "2026-07-28", "SDK stateless JSON", "auto"),
)
# serve ÷ SDK: which runs each ratio compares, by their index in RUNS
RATIOS = ((0, 2), (0, 3), (1, 4), (5, 6), (5, 7))


# --- the bare SDK servers (``bench_sessions.py --serve KIND PORT``) --------------------------

def serve_sdk(kind: str, port: int) -> None:
    import uvicorn

    app = bare_server().streamable_http_app(
        streamable_http_path="/mcp", stateless_http=kind != "SDK sessions",
        json_response=kind.endswith("JSON"))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


# --- the measuring side ---------------------------------------------------------------------

@dataclass
class Running:
    proc: subprocess.Popen[str]
    url: str
    token: str | None

    def stop(self) -> None:
        stop(self.proc)


def start(kind: str, cpu: int, scratch: Path) -> Running:
    if kind.startswith("serve"):
        state = Path(tempfile.mkdtemp(dir=scratch))
        (scratch / "tools.py").write_text(TOOLS)
        sessions = ["--sessions"] if kind.endswith("--sessions") else []
        proc, url, token = start_serve(scratch / "tools.py", state, args=sessions, cpu=cpu)
        return Running(proc, url + "/mcp", token)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "TOOLKEEPER_TOKEN"}
    proc = subprocess.Popen(["taskset", "-c", str(cpu), sys.executable,
                             str(Path(__file__).resolve()), "--serve", kind, str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
                            env=env)
    until_listening(proc, port, kind, 120)
    return Running(proc, f"http://127.0.0.1:{port}/mcp", None)


def sessions(server: Running, mode: str, count: int, round_: int) -> tuple[list[float], float]:
    """``count`` new sessions, each opened and its first call made: the time of each in ms,
    and the sessions opened, called and closed per second."""
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def one(http: httpx2.AsyncClient, rng: random.Random) -> float:
        a, b = rng.randrange(10**6), rng.randrange(1000)
        began = time.perf_counter()
        async with Client(streamable_http_client(server.url, http_client=http),
                          mode=mode) as client:
            result = await client.call_tool("add", {"a": a, "b": b})
            took = (time.perf_counter() - began) * 1000
        if result.is_error or result.structured_content != {"result": a + b}:
            raise SystemExit(f"wrong answer from {server.url}: {result}")
        return took

    async def run() -> tuple[list[float], float]:
        headers = {"Authorization": f"Bearer {server.token}"} if server.token else {}
        rng = random.Random(round_)
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            for _ in range(10):  # warm up: imports, caches, the connection
                await one(http, rng)
            began = time.perf_counter()
            times = [await one(http, rng) for _ in range(count)]
            return times, count / (time.perf_counter() - began)

    return anyio.run(run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sessions-per-round", type=int, default=200)
    parser.add_argument("--server-cpu", type=int, default=1)
    parser.add_argument("--client-cpu", type=int, default=0)
    parser.add_argument("--serve", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve_sdk(args.serve[0], int(args.serve[1]))
        return
    if shutil.which("taskset") is None:
        raise SystemExit("taskset is missing: it is in the Debian package util-linux")
    os.sched_setaffinity(0, {args.client_cpu})
    began = datetime.datetime.now(datetime.UTC)
    load_before = os.getloadavg()[0]
    times: dict[int, list[float]] = {}
    rates: dict[int, list[float]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for round_ in range(args.rounds):
            order = list(range(len(RUNS)))
            random.Random(round_).shuffle(order)
            for index in order:
                _, _, kind, mode = RUNS[index]
                server = start(kind, args.server_cpu, Path(scratch))
                try:
                    got, rate = sessions(server, mode, args.sessions_per_round, round_)
                finally:
                    server.stop()
                times.setdefault(index, []).extend(got)
                rates.setdefault(index, []).append(rate)
            print(f"round {round_ + 1} done", file=sys.stderr, flush=True)
    report(began, load_before, times, rates, args)


def _p(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, round(len(ordered) * share) - 1)]


def report(began: datetime.datetime, load_before: float, times: dict[int, list[float]],
           rates: dict[int, list[float]], args: argparse.Namespace) -> None:
    versions = ", ".join(f"{name} {importlib.metadata.version(name)}"
                         for name in ("mcp", "uvicorn"))
    print(f"{began:%Y-%m-%d %H:%M} UTC; {platform.system()} {platform.release()}, "
          f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, {versions}; each server "
          f"on cpu {args.server_cpu}, the client on cpu {args.client_cpu}; "
          f"{args.sessions_per_round} sessions per server and round, {args.rounds} interleaved "
          f"rounds; load average {load_before:.2f} at the start, {os.getloadavg()[0]:.2f} at "
          f"the end\n")
    print("| era | server | new session + first call, p50 ms | p99 ms | sessions/s (median) |")
    print("|---|---|---:|---:|---:|")
    for index, (name, era, _, _) in enumerate(RUNS):
        print(f"| {era} | {name} | {_p(times[index], 0.5):.2f} | {_p(times[index], 0.99):.2f} "
              f"| {statistics.median(rates[index]):,.0f} |")
    print()
    for ours, theirs in RATIOS:
        print(f"- {RUNS[ours][1]}: {RUNS[ours][0]} ÷ {RUNS[theirs][0]}: p50 "
              f"{_p(times[ours], 0.5) / _p(times[theirs], 0.5):.2f}x, p99 "
              f"{_p(times[ours], 0.99) / _p(times[theirs], 0.99):.2f}x, sessions/s "
              f"{statistics.median(rates[ours]) / statistics.median(rates[theirs]):.2f}x")


if __name__ == "__main__":
    main()
