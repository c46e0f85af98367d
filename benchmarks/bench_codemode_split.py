"""Benchmark: where a cold code-mode start goes, step by step.

One cold ``run_chain`` (a sandbox started for the run) with the wall clock read at each step,
on the host (``time.time()`` around toolkeeper's own functions, wrapped here) and inside the
sandbox (the boot, the prelude and the script read the same clock: ``CLOCK_REALTIME`` is not
namespaced). The steps:

- the host prepares the launch (the scratch directory, the bridge, the prelude's frame, the
  bwrap command line, the seccomp program, the mounts' fds) and creates the call's cgroup;
- it starts the launch gate (``sh`` held on a pipe) and puts the limits on it: the move into
  the call's cgroup(s) by pid and the rlimits (``Gate.release``); or, where a spare gate is
  ready (``sandbox.spare``: its group made and the gate moved in before the run), hands the
  spare its command line and fds and sets its rlimits (``Spare.hand``: the three host rows
  then time that, and the group's creation and the ``Popen`` read 0);
- a spare gate drops root itself (a root host) and execs bubblewrap; without one, ``sh``
  execs ``setpriv``, which execs bubblewrap; bubblewrap forks the sandbox's init in its new
  namespaces (bwrap writes the init's pid to its info fd);
- bubblewrap mounts, loads the seccomp filter, execs util-linux's ``prlimit`` (the process
  count of the sandbox's own user namespace), which execs ``python3 -I -S``: the interpreter's
  start until the boot's first statement;
- the boot reads and runs the prelude; the prelude reads the start frame; the script's first
  line.

Each measurement in a fresh process after one warm-up run; the step times are medians of the
differences between consecutive marks (so the rows do not add up to the total exactly).

    python benchmarks/bench_codemode_split.py [--runs 20]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import marshal
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import anyio

from toolkeeper import ToolInvoker, tool
from toolkeeper.codemode import ToolChainTool, prelude, runner
from toolkeeper.invoke import ChainPolicy
from toolkeeper.sandbox import bubblewrap, limits, process

try:
    from toolkeeper.sandbox import spare
except ImportError:  # code from before the spare launch gate
    spare = None  # type: ignore[assignment]

MARKS: dict[str, float] = {}
STEPS = (
    ("launch_prepared", "host: the scratch, the bridge, the bwrap command line, seccomp, fds"),
    ("group_made", "host: the call's cgroup created"),
    ("gate_started", "host: `Popen` of the gate (`sh`)"),
    ("limits_on", "host: the gate moved into the cgroup(s), its rlimits set, let go"),
    ("init_forked", "the gate → `bwrap` (`sh` → `setpriv` without a spare gate): namespaces "
                    "made, the sandbox's init forked"),
    ("boot", "bwrap's mounts and seccomp, `prlimit`, `python3 -I -S` start → the boot"),
    ("prelude", "the boot reads and runs the prelude"),
    ("start_frame", "the prelude ready and the start frame read"),
    ("first_line", "the script's first line"),
)


def mark(name: str) -> None:
    MARKS.setdefault(name, time.time())


@tool
async def lookup(key: int) -> int:
    """Look a key up."""
    return key


def _instrument() -> None:
    """Wrap toolkeeper's launch functions and the boot and prelude with clock reads."""
    run_process, release, feed = (bubblewrap.run_process, limits.Gate.release,
                                  process._Namespace.feed)
    group = process.call_group

    def timed_run_process(*args: Any, **kwargs: Any) -> Any:
        mark("launch_prepared")
        return run_process(*args, **kwargs)

    @contextlib.contextmanager
    def timed_group(*args: Any) -> Iterator[Any]:
        with group(*args) as made:
            mark("group_made")
            yield made

    def timed_release(self: limits.Gate, pid: int) -> None:
        mark("gate_started")
        release(self, pid)
        mark("limits_on")

    def timed_feed(self: Any, chunk: bytes) -> None:
        mark("init_forked")
        feed(self, chunk)

    bubblewrap.run_process = timed_run_process  # type: ignore[assignment]
    process.call_group = timed_group  # type: ignore[assignment]
    limits.Gate.release = timed_release  # type: ignore[method-assign]
    process._Namespace.feed = timed_feed  # type: ignore[method-assign]
    if spare is not None:  # a spare gate taken: its group made and the gate moved in before
        hand = spare.Spare.hand

        def timed_hand(self: Any, *args: Any, **kwargs: Any) -> Any:
            mark("group_made")
            mark("gate_started")
            handed = hand(self, *args, **kwargs)
            mark("limits_on")
            return handed

        spare.Spare.hand = timed_hand  # type: ignore[method-assign]
    runner.BOOT = "import time as _tkt; _TK0 = _tkt.time()\n" + prelude.BOOT
    source = prelude.PRELUDE
    for anchor, added in (("def _bridge():\n", "    _TK1 = _tkt.time()\n"),
                          ("    start = receive()\n", "    _TK2 = _tkt.time()\n")):
        assert anchor in source, anchor
        source = source.replace(anchor, anchor + added, 1)
    anchor = '"WORKSPACE": start.get("workspace")'
    assert anchor in source
    source = source.replace(anchor, anchor + ', "_TK": [_TK0, _TK1, _TK2]', 1)
    code = marshal.dumps(compile(source, "<prelude>", "exec"))
    body = marshal.dumps((sys.implementation.cache_tag, code, source), 4)
    runner.prelude_frame = lambda: len(body).to_bytes(4, "big") + body  # type: ignore[assignment]


async def cold() -> dict[str, float]:
    chain = ToolChainTool(ToolInvoker([lookup], policy=ChainPolicy(max_tool_calls=10)))
    MARKS.clear()
    before = time.time()
    run = await chain.run_chain("import time\nresult = [time.time()] + _TK")
    assert run.status == "ok", run.output_text
    first, boot, ran, started = run.value
    marks = {**MARKS, "boot": boot, "prelude": ran, "start_frame": started, "first_line": first}
    return {name: (marks[name] - before) * 1000 for name, _ in STEPS}


def one() -> dict[str, float]:
    _instrument()
    anyio.run(cold)  # the warm-up
    if spare is not None:  # the spare gate the warm-up's take began preparing
        spare.spares.wait_ready(5.0)
    return anyio.run(cold)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one()))
        return
    load_at_start = os.getloadavg()[0]
    runs = [json.loads(subprocess.run([sys.executable, __file__, "--one"], check=True,
                                      capture_output=True, text=True).stdout)
            for _ in range(args.runs)]
    print(f"{time.strftime('%Y-%m-%d')}, Python {sys.version.split()[0]}, {args.runs} cold "
          f"starts, each in a fresh process after one warm-up; load average "
          f"{load_at_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end\n")
    print("| step | p50 ms | p25–p75 ms | at (p50) ms |")
    print("|---|---:|---:|---:|")
    previous = None
    for name, said in STEPS:
        spans = [run[name] - (run[previous] if previous else 0.0) for run in runs]
        low, _, high = statistics.quantiles(spans, n=4)
        at = statistics.median(run[name] for run in runs)
        print(f"| {said} | {statistics.median(spans):.2f} | {low:.2f}–{high:.2f} | {at:.1f} |")
        previous = name


if __name__ == "__main__":
    main()
