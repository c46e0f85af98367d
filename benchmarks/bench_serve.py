"""Benchmark: ``toolkeeper serve`` as shipped, beside the servers it is measured against.

Five HTTP servers offer the same async ``add(a, b)`` as an MCP ``tools/call`` on ``/mcp``:

- ``toolkeeper serve``: the real command (``python -m toolkeeper.cli serve tools.py``), as
  users run it: SQLite audit on, auth on (the client token serve makes on first start), every
  call through the invoker's door; only the rate limit is off (``--rate-limit 0``).
- bare SDK (SSE) and bare SDK (JSON): the official SDK's low-level ``Server`` with the same
  tool, output schema, text and structured content, over its stateless Streamable HTTP app,
  answering as an event stream (the default) or as one JSON body (``json_response=True``).
- FastMCP: ``@mcp.tool``, stateless HTTP, as its docs set it up.
- raw Starlette: one route that parses the JSON-RPC request, validates the arguments with
  pydantic, calls ``add`` and answers the same result as JSON — the ceiling for a Python
  server on this stack.
- raw Starlette (granian): the same app served by Granian (a Rust HTTP server; one worker, one
  runtime thread, its ASGI interface, uvloop under ``--stack fast``) instead of uvicorn: the other
  maintained HTTP stack an ASGI app such as ``toolkeeper serve`` could run on, measured on the
  same app.

Each server runs pinned to one core (``taskset``); ``wrk`` (one thread, on the other core) posts
``tools/call``s with random arguments for ``--duration`` seconds over 1 and 16 kept-alive
connections, and its Lua script (``bench_serve.lua``) checks every answer (a wrong or failed
one is counted: the run fails unless there are none). Then one official-SDK client makes
``--calls`` sequential calls on one kept-alive connection (latency per call). Rounds are
interleaved (each round starts every server once, in a shuffled order); each figure is the
median over the rounds.

Around every ``wrk`` run the server's CPU time is read from ``/proc/PID/stat`` (user and
system, all its threads, of the process holding the listening socket: ``cputime.py``) and
divided by the calls answered: **CPU µs per call**, at 1 and 16 connections. Other jobs on the
machine move calls/s and the tail a lot and this figure little, since it counts only the time
the server itself ran; ``1e6 / CPU µs per call`` is the calls one core can answer, and the
ratios line gives each server's as a share of the raw endpoint's, next to the share by calls/s.
The kernel counts CPU time in clock ticks (100 a second on most machines): a run that collects
fewer than 100 is warned about (lengthen ``--duration``). ``--json PATH`` writes every run's
figures, not only the medians, with the load average and the options, so a table can be made
again from them.

``--stack plain`` runs every server on uvicorn's pure-Python parser (h11) and asyncio's own
loop even where the ``fast`` extra (httptools, uvloop) is installed; ``--stack fast`` (the
default) lets each use them when installed, as uvicorn and ``toolkeeper serve`` do.

    python benchmarks/bench_serve.py [--before SRC] [--rounds 3] [--duration 5] [--calls 300] [--stack fast|plain]
        [--only SERVER]... [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_mcp import bare_server  # the same SDK server, run by this script too
from cputime import CLOCK_TICKS, MIN_TICKS, CpuClock, serving_pids
from served import free_port, start_serve, until_listening
from served import stop as stop_process

HERE = Path(__file__).resolve().parent
LUA = HERE / "bench_serve.lua"
GRANIAN = "raw Starlette (granian)"
SERVERS = ("toolkeeper serve", "bare SDK (SSE)", "bare SDK (JSON)", "FastMCP", "raw Starlette",
           GRANIAN)
PLAIN = "import sys; sys.modules.update(httptools=None, uvloop=None)"
"""Run in a server's process first, it hides the ``fast`` extra: uvicorn falls back to h11 and
asyncio's loop, and ``toolkeeper serve`` to asyncio's."""
TOOLS = '''
from toolkeeper import tool


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''


# --- the servers other than toolkeeper serve (``bench_serve.py --serve KIND PORT``) ---------

def serve(kind: str, port: int, stack: str = "fast") -> None:
    if stack == "plain":
        exec(PLAIN)
    import uvicorn

    if kind == "FastMCP":
        from fastmcp import FastMCP

        mcp = FastMCP("bench")

        @mcp.tool
        async def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        mcp.run(transport="http", host="127.0.0.1", port=port, show_banner=False,
                stateless_http=True, log_level="warning")
        return
    if kind == GRANIAN:
        from granian.constants import Interfaces, Loops
        from granian.server import Server

        Server("bench_serve:RAW", address="127.0.0.1", port=port, interface=Interfaces.ASGI,
               workers=1, runtime_threads=1, log_enabled=False,
               loop=Loops.uvloop if stack == "fast" else Loops.asyncio).serve()
        return
    app = _raw() if kind == "raw Starlette" else bare_server().streamable_http_app(
        streamable_http_path="/mcp", stateless_http=True, json_response=kind.endswith("(JSON)"))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def _raw() -> Any:
    import json

    from pydantic import BaseModel
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    class AddArgs(BaseModel):
        a: int
        b: int

    async def add(a: int, b: int) -> int:
        return a + b

    async def endpoint(request: Request) -> JSONResponse:
        message = json.loads(await request.body())
        args = AddArgs.model_validate(message["params"]["arguments"])
        total = await add(args.a, args.b)
        return JSONResponse({"jsonrpc": "2.0", "id": message["id"], "result": {
            "content": [{"type": "text", "text": str(total)}],
            "structuredContent": {"result": total}, "isError": False}})

    return Starlette(routes=[Route("/mcp", endpoint, methods=["POST"])])


def __getattr__(name: str) -> Any:
    """``RAW``: the raw endpoint's app, for a server that imports it by name (Granian)."""
    if name == "RAW":
        return _raw()
    raise AttributeError(name)


# --- the measuring side ---------------------------------------------------------------------

@dataclass
class Running:
    proc: subprocess.Popen[str]
    url: str
    token: str | None
    pids: tuple[int, ...]
    """The processes that hold the listening socket: whose CPU time is the server's."""


BEFORE = "toolkeeper serve (before)"
"""``--before SRC``: the same command with another checkout's ``src`` ahead on the path."""


def start(kind: str, cpu: int, scratch: Path, stack: str = "fast",
          before: Path | None = None) -> Running:
    if kind in ("toolkeeper serve", BEFORE):
        env = {k: v for k, v in os.environ.items() if k != "TOOLKEEPER_TOKEN"}
        if kind == BEFORE and before is not None:
            env["PYTHONPATH"] = str(before)
        state = Path(tempfile.mkdtemp(dir=scratch))
        (scratch / "tools.py").write_text(TOOLS)
        runner = (f"{PLAIN if stack == 'plain' else ''}\nimport runpy; "
                  "runpy.run_module('toolkeeper.cli', run_name='__main__', alter_sys=True)")
        proc, url, token = start_serve(scratch / "tools.py", state, cpu=cpu,
                                       launcher=("-c", runner), env=env, timeout_s=60)
        return Running(proc, url + "/mcp", token,
                       serving_pids(proc.pid, int(url.rsplit(":", 1)[1])))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "TOOLKEEPER_TOKEN"}
    proc = subprocess.Popen(["taskset", "-c", str(cpu), sys.executable,
                             str(Path(__file__).resolve()), "--serve", kind, str(port), stack],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
                            env=env)
    until_listening(proc, port, kind)
    return Running(proc, f"http://127.0.0.1:{port}/mcp", None, serving_pids(proc.pid, port))


def stop(server: Running) -> None:
    stop_process(server.proc, 20)


_RESULT = re.compile(r"RESULT requests=(\d+) answered=(\d+) wrong=(\d+) errors=(\d+) "
                     r"p50_us=(\d+) p99_us=(\d+) duration_us=(\d+)")


def load(server: Running, connections: int, seconds: float, cpu: int) -> dict[str, float]:
    """wrk's figures — calls/s, p50 and p99 in ms, wrong answers — and the server's: the clock
    ticks of CPU time (user and system, all its threads) it used during the run, and that time
    per answered call in µs."""
    command = ["taskset", "-c", str(cpu), "wrk", "-t1", f"-c{connections}", f"-d{round(seconds)}s",
               "--timeout", "10s", "-s", str(LUA), server.url, "--", server.token or ""]
    clock = CpuClock(server.pids)
    clock.start()
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60,
                          check=False)
    ticks = clock.stop()
    found = _RESULT.search(done.stdout)
    if found is None:
        raise SystemExit(f"wrk gave no result: {done.stdout} {done.stderr}")
    requests, answered, wrong, errors, p50, p99, duration = map(int, found.groups())
    return {"rate": answered / (duration / 1e6), "p50": p50 / 1000, "p99": p99 / 1000,
            "wrong": wrong + errors + (requests - answered), "ticks": ticks,
            "cpu": ticks / CLOCK_TICKS * 1e6 / max(answered, 1), "calls": answered}


def sequential(server: Running, calls: int) -> dict[str, float]:
    """One official-SDK client, ``calls`` calls one after another on one kept-alive
    connection: per-call latency in ms."""
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def run() -> list[float]:
        headers = {"Authorization": f"Bearer {server.token}"} if server.token else {}
        http = httpx2.AsyncClient(headers=headers, timeout=60)
        rng = random.Random(calls)
        times = []
        async with Client(streamable_http_client(server.url, http_client=http)) as client:
            for n in range(calls + 20):
                a, b = rng.randrange(10**6), rng.randrange(1000)
                began = time.perf_counter()
                result = await client.call_tool("add", {"a": a, "b": b})
                if n >= 20:
                    times.append((time.perf_counter() - began) * 1000)
                if result.is_error or result.structured_content != {"result": a + b}:
                    raise SystemExit(f"wrong answer from the SDK client: {result}")
        return times

    times = sorted(anyio.run(run))
    return {"p50": statistics.median(times), "p99": times[int(len(times) * 0.99) - 1]}


Figures = dict[tuple[str, str], list[float]]
"""Every run's figure by server and name (``rate@16``, ``cpu@1``, ``sdk_p50``...), in the
order of the rounds."""


def main() -> None:
    args = arguments()
    if args.serve:
        serve(args.serve[0], int(args.serve[1]), args.serve[2])
        return
    for command in ("wrk", "taskset"):
        if shutil.which(command) is None:
            raise SystemExit(f"{command} is missing: make bench installs it (Debian package "
                             f"{'wrk' if command == 'wrk' else 'util-linux'})")
    os.sched_setaffinity(0, {args.load_cpu})  # the SDK client: beside wrk, off the server's
    kinds = tuple(args.only or SERVERS) + ((BEFORE,) if args.before else ())
    figures: Figures = {}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as scratch:
        for round_ in range(args.rounds):
            order = list(kinds)
            random.Random(round_).shuffle(order)
            for kind in order:
                measure(kind, Path(scratch), args, figures)
                print(f"round {round_ + 1}: {kind} done", file=sys.stderr, flush=True)
    load_after = os.getloadavg()
    if args.json:
        write_json(args.json, figures, kinds, args, (load_before, load_after))
    report(figures, kinds, args, (load_before[0], load_after[0]))


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5, help="seconds per wrk run")
    parser.add_argument("--calls", type=int, default=300, help="sequential SDK-client calls")
    parser.add_argument("--server-cpu", type=int, default=1)
    parser.add_argument("--load-cpu", type=int, default=0)
    parser.add_argument("--only", action="append", choices=SERVERS, help="these servers only")
    parser.add_argument("--stack", choices=("fast", "plain"), default="fast",
                        help="plain: h11 and asyncio everywhere, even with httptools and uvloop "
                        "installed")
    parser.add_argument("--json", type=Path, metavar="PATH",
                        help="also write every run's figures (not only the medians) here")
    parser.add_argument("--before", type=Path, metavar="SRC",
                        help="also run toolkeeper serve with another checkout's src folder "
                        "ahead on the path, in the same rounds")
    parser.add_argument("--serve", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.before is not None and not (args.before / "toolkeeper" / "__init__.py").is_file():
        parser.error(f"--before {args.before}: no toolkeeper package there; give a "
                     "checkout's src folder")
    return args


def measure(kind: str, scratch: Path, args: argparse.Namespace, figures: Figures) -> None:
    """One round of one server: a fresh process, a warm-up, wrk at 1 and 16 connections,
    then the official client's sequential calls."""
    server = start(kind, args.server_cpu, scratch, args.stack, args.before)
    try:
        load(server, 16, 1.0, args.load_cpu)  # warm up
        for connections in (1, 16):
            got = load(server, connections, args.duration, args.load_cpu)
            if got["ticks"] < MIN_TICKS:
                print(f"warning: {kind} used {got['ticks']:g} clock ticks of CPU at "
                      f"{connections} connection(s) ({CLOCK_TICKS} a second): its CPU per "
                      "call is coarse; give --duration more seconds", file=sys.stderr)
            for key, value in got.items():
                figures.setdefault((kind, f"{key}@{connections}"), []).append(value)
        if not kind.startswith("raw Starlette"):  # it speaks tools/call only, no handshake
            for key, value in sequential(server, args.calls).items():
                figures.setdefault((kind, f"sdk_{key}"), []).append(value)
    finally:
        stop(server)


def write_json(path: Path, figures: Figures, kinds: tuple[str, ...], args: argparse.Namespace,
               loads: tuple[tuple[float, ...], tuple[float, ...]]) -> None:
    """Every run's figures, by server and name, and how they were taken: what a table in
    docs/benchmarks.md can be made again from."""
    runs: dict[str, dict[str, list[float]]] = {kind: {} for kind in kinds}
    for (kind, key), values in figures.items():
        runs[kind][key] = values
    path.write_text(json.dumps({
        "python": sys.version.split()[0], "cores": os.cpu_count(), "clock_ticks": CLOCK_TICKS,
        "load_average": {"before": loads[0], "after": loads[1]},
        "options": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()
                    if k != "serve"},
        "units": {"rate": "calls/s", "p50": "ms", "p99": "ms", "cpu": "µs per call",
                  "ticks": "clock ticks", "calls": "answered", "wrong": "calls"},
        "runs": runs,
    }, indent=2, ensure_ascii=False) + "\n")


def report(figures: Figures, kinds: tuple[str, ...], args: argparse.Namespace,
           loads: tuple[float, float]) -> None:
    def med(kind: str, key: str) -> float:
        return statistics.median(figures[(kind, key)])

    wrong = sum(sum(v) for (_, key), v in figures.items() if key.startswith("wrong"))
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} cores, load average "
          f"{loads[0]:.2f} at the start and {loads[1]:.2f} at the end; wrk -t1 for "
          f"{args.duration:g} s per run, {args.rounds} interleaved rounds (median); stack "
          f"{args.stack}; {args.calls} sequential official-SDK calls per server and round; "
          f"wrong answers: {wrong:g}\n")
    print("| server | calls/s (1 conn) | p50 ms | p99 ms | CPU µs/call | calls/s (16 conn) "
          "| p50 ms | p99 ms | CPU µs/call | SDK client p50 ms | p99 ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for kind in kinds:
        sdk = (f"{med(kind, 'sdk_p50'):.2f} | {med(kind, 'sdk_p99'):.2f}"
               if (kind, "sdk_p50") in figures else "– | –")
        wire = " | ".join(f"{med(kind, f'rate@{n}'):,.0f} | {med(kind, f'p50@{n}'):.2f} | "
                          f"{med(kind, f'p99@{n}'):.2f} | {med(kind, f'cpu@{n}'):.0f}"
                          for n in (1, 16))
        print(f"| {kind} | {wire} | {sdk} |")
    print()
    raw = "raw Starlette"
    for kind in kinds if raw in kinds else ():
        if kind != raw:  # capacity by CPU: calls a core can answer, 1e6 / CPU µs per call
            print(f"- {kind}'s capacity as a share of the raw endpoint's: by CPU per call "
                  f"{med(raw, 'cpu@16') / med(kind, 'cpu@16'):.2f}× at 16 connections, "
                  f"{med(raw, 'cpu@1') / med(kind, 'cpu@1'):.2f}× at 1; by calls/s "
                  f"{med(kind, 'rate@16') / med(raw, 'rate@16'):.2f}× at 16 connections")
    if "toolkeeper serve" in kinds:
        serve_ratios(med, kinds)
    if BEFORE in kinds and "toolkeeper serve" in kinds:
        print(f"- serve now ÷ before: CPU per call at 16 connections "
              f"{med('toolkeeper serve', 'cpu@16') / med(BEFORE, 'cpu@16'):.2f}× "
              f"({med(BEFORE, 'cpu@16'):.0f} → {med('toolkeeper serve', 'cpu@16'):.0f} µs), "
              f"at 1 {med('toolkeeper serve', 'cpu@1') / med(BEFORE, 'cpu@1'):.2f}×; calls/s "
              f"at 16 connections {med('toolkeeper serve', 'rate@16') / med(BEFORE, 'rate@16'):.2f}×")
    if wrong:
        raise SystemExit(f"{wrong:g} wrong or failed answers")


def serve_ratios(med: Callable[[str, str], float], kinds: tuple[str, ...]) -> None:
    serve_ = "toolkeeper serve"
    for other in ("FastMCP", "bare SDK (SSE)", "bare SDK (JSON)"):
        if other not in kinds:
            continue
        print(f"- capacity (16 conn), serve ÷ {other}: "
              f"{med(serve_, 'rate@16') / med(other, 'rate@16'):.2f}× by calls/s, "
              f"{med(other, 'cpu@16') / med(serve_, 'cpu@16'):.2f}× by CPU per call; "
              f"p50 on one kept-alive connection (wrk), serve ÷ {other}: "
              f"{med(serve_, 'p50@1') / med(other, 'p50@1'):.2f}×; "
              f"official-SDK client p50, serve ÷ {other}: "
              f"{med(serve_, 'sdk_p50') / med(other, 'sdk_p50'):.2f}×")
    print(f"- serve's p99 ÷ p50 at 16 connections: "
          f"{med(serve_, 'p99@16') / med(serve_, 'p50@16'):.1f}×")


if __name__ == "__main__":
    main()
