"""Benchmark: ``toolkeeper serve``'s own app, driven in process with no sockets.

The real ``toolkeeper serve`` command (``--no-builtins --rate-limit 0``: SQLite audit on, auth
on with the client token serve makes, every call through the invoker's door) is started in this
process with uvicorn's ``serve`` replaced by a driver that hands the ASGI app ``tools/call``s of
``add`` (the tool ``bench_serve.py`` serves), ``--concurrency`` at a time, as uvicorn would hand
them (a 2025-11-25 POST to ``/mcp``), checks every answer and prints the process's CPU time per
call (``time.process_time``: every thread, the audit writer's included). No HTTP parser, no
kernel, no ``wrk`` beside it: what is left is serve's app, so a change to it shows here with
less spread than over HTTP, and the HTTP stack's share is ``bench_serve.py``'s figure minus
this one.

``--before SRC`` runs another tree's serve (its ``src``) in turn with this one's, in every
round, each in a fresh process pinned to the same core (``--cpu``), and prints both medians and
the median of the rounds' ratios. ``--raw`` also drives ``bench_serve.py``'s raw Starlette
endpoint the same way in every round: its figure here against its figure over HTTP is what the
HTTP stack (uvicorn, the kernel) costs a call, the reference for serve's.

    python benchmarks/bench_serve_inproc.py [--calls 8000] [--concurrency 16] [--rounds 5]
        [--before SRC] [--raw] [--cpu 0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


async def _drive(app: Any, port: int, token: bytes, calls: int, concurrency: int) -> str:
    lifespan_in: asyncio.Queue[Any] = asyncio.Queue()
    lifespan_out: asyncio.Queue[Any] = asyncio.Queue()
    life = asyncio.ensure_future(app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}},
                                     lifespan_in.get, lifespan_out.put))
    await lifespan_in.put({"type": "lifespan.startup"})
    started = await lifespan_out.get()
    assert started["type"].endswith("complete"), started
    headers = [(b"host", f"127.0.0.1:{port}".encode()), (b"content-type", b"application/json"),
               (b"accept", b"application/json, text/event-stream"),
               (b"mcp-protocol-version", b"2025-11-25"), (b"authorization", b"Bearer " + token)]
    wrong = 0

    async def one(i: int) -> None:
        nonlocal wrong
        a, b = random.randint(0, 1000), random.randint(0, 1000)
        body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                           "params": {"name": "add", "arguments": {"a": a, "b": b}}}).encode()
        scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"},
                 "http_version": "1.1", "method": "POST", "scheme": "http", "path": "/mcp",
                 "raw_path": b"/mcp", "query_string": b"", "root_path": "",
                 "headers": [*headers, (b"content-length", str(len(body)).encode())],
                 "client": ("127.0.0.1", 50000 + i % 16), "server": ("127.0.0.1", port),
                 "state": {}}
        sent = False
        never = asyncio.get_running_loop().create_future()

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await never  # the client never hangs up
            return {"type": "http.disconnect"}

        out: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            out.append(message)

        await app(scope, receive, send)
        answer = json.loads(b"".join(m.get("body", b"") for m in out
                                     if m["type"] == "http.response.body"))
        if answer.get("result", {}).get("structuredContent", {}).get("result") != a + b:
            wrong += 1

    async def worker(k: int, n: int) -> None:
        for j in range(n):
            await one(k * n + j)

    await asyncio.gather(*(worker(k, 200 // concurrency) for k in range(concurrency)))  # warm
    each = calls // concurrency
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker(k, each) for k in range(concurrency)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    life.cancel()
    n = each * concurrency
    return json.dumps({"calls": n, "wrong": wrong, "cpu_us": cpu / n * 1e6,
                       "wall_us": wall / n * 1e6})


def _serve(calls: int, concurrency: int) -> None:
    """In a child: run the real command with uvicorn's ``serve`` replaced by the driver."""
    from toolkeeper.cli import serve_run
    from toolkeeper.cli.entry import main

    state = Path(os.environ["BENCH_STATE"])

    async def fake_serve(self: Any, sockets: Any = None) -> None:
        token = (state / "client-token").read_text().strip().encode()
        line = await _drive(self.config.app, self.sock.getsockname()[1], token, calls,
                            concurrency)
        print("RESULT " + line, flush=True)
        os._exit(0)

    serve_run._Uvicorn.serve = fake_serve  # type: ignore[method-assign]
    sys.argv = ["toolkeeper", "serve", "tools.py", "--no-builtins", "--port", "0",
                "--rate-limit", "0", "--state-dir", str(state), "--workspace", os.getcwd()]
    main()


def _raw_child(calls: int, concurrency: int) -> None:
    """In a child: drive ``bench_serve.py``'s raw Starlette endpoint as serve's app is driven."""
    sys.path.insert(0, str(HERE))
    from bench_serve import _raw

    line = asyncio.run(_drive(_raw(), 8000, b"unused", calls, concurrency))
    print("RESULT " + line, flush=True)


def _run(src: Path, args: argparse.Namespace, raw: bool = False) -> dict[str, float]:
    sys.path.insert(0, str(HERE))
    from bench_serve import TOOLS  # the same tool as over HTTP

    work = Path(tempfile.mkdtemp(prefix="serve-inproc-"))
    try:
        (work / "tools.py").write_text(TOOLS)
        env = {**os.environ, "PYTHONPATH": str(src), "BENCH_STATE": str(work / "state")}
        command = ["taskset", "-c", str(args.cpu), sys.executable, __file__,
                   "--raw-child" if raw else "--child",
                   "--calls", str(args.calls), "--concurrency", str(args.concurrency)]
        out = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True,
                             timeout=600)
        lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
        if not lines:
            raise SystemExit(f"no result from {src}:\n{out.stdout}\n{out.stderr}")
        result: dict[str, float] = json.loads(lines[-1][len("RESULT "):])
        if result["wrong"]:
            raise SystemExit(f"{result['wrong']} wrong answers from {src}")
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=8000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cpu", type=int, default=0, help="the core every run is pinned to")
    parser.add_argument("--before", type=Path, metavar="SRC", help="another tree's src")
    parser.add_argument("--raw", action="store_true",
                        help="also drive the raw Starlette endpoint, in every round")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--raw-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _serve(args.calls, args.concurrency)
        return
    if args.raw_child:
        _raw_child(args.calls, args.concurrency)
        return
    sides = {"now": HERE.parent / "src"}
    if args.before is not None:
        sides["before"] = args.before.resolve()
    if args.raw:
        sides["raw"] = HERE.parent / "src"
    cpu: dict[str, list[float]] = {side: [] for side in sides}
    load = os.getloadavg()[0]
    for round_ in range(args.rounds):
        order = list(sides)
        random.shuffle(order)
        for side in order:
            cpu[side].append(_run(sides[side], args, raw=side == "raw")["cpu_us"])
        print(f"round {round_ + 1}: " + ", ".join(f"{s} {cpu[s][-1]:.1f}" for s in sides),
              file=sys.stderr)
    print(f"load average {load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end; "
          f"{args.rounds} rounds of {args.calls} calls, {args.concurrency} at a time")
    for side, values in cpu.items():
        print(f"{side}: CPU µs/call median {statistics.median(values):.1f} "
              f"(rounds: {', '.join(f'{v:.1f}' for v in values)})")
    if "before" in cpu:
        ratios = [n / b for n, b in zip(cpu["now"], cpu["before"], strict=True)]
        print(f"now ÷ before: {statistics.median(cpu['now']) / statistics.median(cpu['before']):.3f}"
              f" (median of the rounds' ratios {statistics.median(ratios):.3f})")
    if "raw" in cpu:
        print(f"raw ÷ now: {statistics.median(cpu['raw']) / statistics.median(cpu['now']):.3f}")


if __name__ == "__main__":
    main()
