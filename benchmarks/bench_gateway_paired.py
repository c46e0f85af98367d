"""Benchmark: what the gateway adds, two checkouts side by side in one set of processes.

``bench_gateway.py`` starts fresh processes for every measurement, and on a shared machine the
same code reads a millisecond apart from one process to the next. Here one HTTP upstream
(``upstreams.py``) and two ``toolkeeper serve`` processes relaying to it — this checkout's and
the one of ``--before SRC`` — stay up for the whole run; a kept-alive official client of each
revision (the 2026-07-28 wire as it connects by default, and the 2025-11-25 handshake) calls
each serve and the upstream directly, in chunks of ``--chunk`` calls taking turns for
``--rounds`` rounds. Reported: the median of the chunks' p50s, and the CPU time a call of the
process answering (serve, or the upstream for a direct call; from ``/proc``, to its clock
tick: use chunks of a few hundred calls).

    python benchmarks/bench_gateway_paired.py --before OLD/src [--rounds 10] [--chunk 200]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from bench_gateway import _cpu_s, _listed, _serve
from upstreams import start_http_upstream

HERE = Path(__file__).resolve()
ERAS = {"auto": "2026-07-28", "legacy": "2025-11-25"}


async def measure(before: str, rounds: int, chunk: int) -> dict[tuple[str, str], Any]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    here = str(HERE.parent.parent / "src")
    with tempfile.TemporaryDirectory() as scratch:
        tmp, procs = Path(scratch), list[Any]()
        upstream, url = start_http_upstream(tmp)
        procs.append(upstream)
        targets: dict[str, tuple[str, int, str]] = {"direct": (url, upstream.pid, "add")}
        try:
            for side, src in (("serve", here), ("serve (before)", before)):
                (tmp / side).mkdir()
                os.environ["PYTHONPATH"] = src
                served, base = _serve(tmp / side, url)
                procs.append(served)
                targets[side] = (f"{base}/mcp", served.pid, "up-add")
            async with AsyncExitStack() as stack:
                kinds: dict[tuple[str, str], Any] = {}
                for side, (where, pid, name) in targets.items():
                    for mode in ERAS:
                        client = await stack.enter_async_context(Client(streamable_http_client(
                            where, http_client=httpx2.AsyncClient(timeout=60)), mode=mode))
                        await _listed(client, name)
                        kinds[(side, mode)] = (client, pid, name)
                return await _rounds(kinds, rounds, chunk)
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=30)


async def _rounds(kinds: dict[tuple[str, str], Any], rounds: int, chunk: int
                  ) -> dict[tuple[str, str], Any]:
    for client, _, name in kinds.values():  # warm up
        for n in range(30):
            await client.call_tool(name, {"a": n, "b": 1})
    p50s: dict[tuple[str, str], list[float]] = {k: [] for k in kinds}
    cpus: dict[tuple[str, str], list[float]] = {k: [] for k in kinds}
    rng = random.Random(0)
    for round_ in range(rounds):
        order = list(kinds)
        random.Random(round_).shuffle(order)
        for kind in order:
            client, pid, name = kinds[kind]
            began_cpu, times = _cpu_s(pid), []
            for _ in range(chunk):
                began = time.perf_counter()
                result = await client.call_tool(name, {"a": rng.randrange(10**6),
                                                       "b": rng.randrange(10)})
                times.append(time.perf_counter() - began)
                assert not result.is_error, result
            ended_cpu = _cpu_s(pid)
            if began_cpu is not None and ended_cpu is not None:
                cpus[kind].append((ended_cpu - began_cpu) / chunk * 1e6)
            p50s[kind].append(statistics.median(times) * 1e6)
    return {kind: (p50s[kind], cpus[kind]) for kind in kinds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", metavar="SRC", required=True,
                        help="the src folder of the checkout to compare with")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--chunk", type=int, default=200)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    found = anyio.run(measure, args.before, args.rounds, args.chunk)
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, Python {sys.version.split()[0]}, {os.cpu_count()} "
          f"cores, {args.rounds} rounds of {args.chunk}-call chunks taking turns, load average "
          f"{load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end\n")
    print("| client → | revision | p50 µs (median of the chunks) | chunks' range | adds (p50) "
          "| CPU µs a call (serve, or the upstream direct) | chunks' range |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for (side, mode), (p50s, cpus) in found.items():
        p50 = statistics.median(p50s)
        direct = statistics.median(found[("direct", mode)][0])
        adds = f"{p50 - direct:,.0f} µs" if side != "direct" else ""
        used = (f"{statistics.median(cpus):,.0f} | {min(cpus):,.0f}–{max(cpus):,.0f}"
                if cpus else " | ")
        print(f"| {side} | {ERAS[mode]} | {p50:,.0f} | {min(p50s):,.0f}–{max(p50s):,.0f} | "
              f"{adds} | {used} |")


if __name__ == "__main__":
    main()
