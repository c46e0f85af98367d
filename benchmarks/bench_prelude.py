"""Benchmark: code mode's boot and prelude alone, without the sandbox, this code against another.

A bare ``python3 -I -S -c BOOT`` with the bridge as a socketpair, the prelude's frame written
first (as the host does): the time from ``Popen`` to the script's first line with the start
frame already written (a cold start's interpreter), and from the start frame to the first line
when it is written once the prelude waits (a pre-started sandbox of the warm pool). The boot
and prelude of this checkout and of ``--before SRC`` (another checkout's ``src``) take turns in
random order; no sandbox, so neither the launch nor the machine's cgroup moves are in it.

    python benchmarks/bench_prelude.py --before OLD/src [--runs 60]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import marshal
import os
import random
import socket
import statistics
import subprocess
import time
from pathlib import Path
from types import ModuleType

from toolkeeper.codemode import prelude
from toolkeeper.codemode.runner import PYTHON

START = {"type": "start", "secret": "s" * 32, "code": "import time\nresult = time.time()",
         "workspace": None, "tools": []}
WAITING_S = 0.1
"""How long a pre-started interpreter is given to reach the start frame's read."""


def _load(src: str) -> ModuleType:
    path = Path(src) / "toolkeeper" / "codemode" / "prelude.py"
    spec = importlib.util.spec_from_file_location("prelude_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _frame(value: object) -> bytes:
    body = marshal.dumps(value, 4)
    return len(body).to_bytes(4, "big") + body


def _answer(sock: socket.socket) -> float:
    data = b""
    while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
        chunk = sock.recv(65536)
        assert chunk, "the interpreter closed the bridge"
        data += chunk
    return float(json.loads(data[4:])["value"])


def one(module: ModuleType, *, waiting: bool) -> float:
    host, child = socket.socketpair()
    with host, child:
        host.settimeout(30)
        host.sendall(module.prelude_frame())
        if not waiting:
            host.sendall(_frame(START))
        before = time.time()
        proc = subprocess.Popen([PYTHON, "-I", "-S", "-c", module.BOOT],
                                pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL,
                                env={"TOOLKEEPER_BRIDGE_FD": str(child.fileno())})
        if waiting:
            time.sleep(WAITING_S)  # a pre-started sandbox's prelude waits for its run
            before = time.time()
            host.sendall(_frame(START))
        first = _answer(host)
        proc.wait(30)
    return (first - before) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--before", metavar="SRC", required=True)
    args = parser.parse_args()
    modules = {"now": prelude, "before": _load(args.before)}
    jobs = [(code, waiting) for code in modules for waiting in (False, True)]
    samples: dict[tuple[str, bool], list[float]] = {job: [] for job in jobs}
    load_at_start = os.getloadavg()[0]
    for run in range(args.runs):
        order = jobs[:]
        random.Random(run).shuffle(order)
        for code, waiting in order:
            samples[code, waiting].append(one(modules[code], waiting=waiting))
    print(f"{time.strftime('%Y-%m-%d')}, {args.runs} interleaved runs; load average "
          f"{load_at_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end\n")
    print("| measurement | p50 ms | p25–p75 ms | p99 ms |")
    print("|---|---:|---:|---:|")
    for (code, waiting), values in samples.items():
        ordered = sorted(values)
        low, _, high = statistics.quantiles(values, n=4)
        what = ("start frame → first line, the prelude waiting (pre-started)" if waiting
                else "`Popen` → first line, frames written first (cold)")
        print(f"| {what}, {code} | {statistics.median(values):.2f} | {low:.2f}–{high:.2f} | "
              f"{ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]:.2f} |")


if __name__ == "__main__":
    main()
