"""Benchmark: code mode's start-up and the cost of a call crossing the bridge.

- start: from ``run_chain`` being called to the first line of the script running (the
  script's first statement reads the clock), against a bare ``python3 -I -S`` started with
  ``subprocess`` to the same first line — both on this host's Debian python3; cold (a sandbox
  started for the run) and warm (``warm=1``: the run takes a pre-started sandbox, whose
  replacement starts while the other measurements run);
- a bridged call: 100 calls of a trivial async tool from inside a script (timed inside the
  script), against 100 direct ``ToolInvoker.invoke`` calls of the same tool on the host, and
  against the same script run by smolagents' ``LocalPythonExecutor`` (an AST interpreter in
  the host process, no OS boundary, no invoker) with the tool as a plain function.

Runs interleaved, random arguments, medians.

    python benchmarks/bench_codemode.py [--runs 20]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from toolkeeper import ToolInvoker, tool
from toolkeeper.codemode import ToolChainTool
from toolkeeper.core.call import ToolCall
from toolkeeper.invoke import ChainPolicy
from toolkeeper.sandbox.base import Limits
from toolkeeper.sandbox.bubblewrap import run_confined

CALLS = 100


@tool
async def lookup(key: int) -> int:
    """Look a key up."""
    return key * 2


SCRIPT = """
import time
start = time.perf_counter()
for i in range({calls}):
    lookup(key={seed} + i)
result = (time.perf_counter() - start) / {calls}
"""


def _invoker() -> ToolInvoker:
    return ToolInvoker([lookup], policy=ChainPolicy(max_tool_calls=10**6))


WARM = ToolChainTool(_invoker(), warm=1)


async def chain_start(chain: ToolChainTool | None = None) -> float:
    chain = chain or ToolChainTool(_invoker())
    before = time.time()
    run = await chain.run_chain("import time\nresult = time.time()")
    return float(run.value) - before


def sandbox_start() -> float:
    """The sandbox alone: the same ``python3 -c`` through ``run_confined`` with the chain's
    limits (what a cold run pays before the prelude)."""
    with tempfile.TemporaryDirectory() as scratch:
        os.chmod(scratch, 0o777)
        before = time.time()
        out = run_confined(Path(scratch), ["/usr/bin/python3", "-I", "-S", "-c",
                                           "import time; print(time.time())"],
                           limits=Limits(processes=32, memory=512 << 20, file_bytes=16 << 20))
    return float(out.stdout) - before


def bare_start() -> float:
    before = time.time()
    out = subprocess.run(["/usr/bin/python3", "-I", "-S", "-c",
                          "import time; print(time.time())"], capture_output=True, text=True,
                         check=True)
    return float(out.stdout) - before


async def bridged_call(seed: int) -> float:
    run = await ToolChainTool(_invoker()).run_chain(SCRIPT.format(calls=CALLS, seed=seed))
    assert run.status == "ok", run.output_text
    return float(run.value)


async def direct_call(seed: int) -> float:
    invoker = _invoker()
    async with invoker.open_session() as session:
        start = time.perf_counter()
        for i in range(CALLS):
            result = await invoker.invoke(ToolCall(id="c", name="lookup",
                                                   arguments={"key": seed + i}), session=session)
            assert result.ok
        return (time.perf_counter() - start) / CALLS


def smolagents_call(seed: int) -> float:
    from smolagents.local_python_executor import LocalPythonExecutor

    def plain_lookup(key: int) -> int:
        return key * 2

    executor = LocalPythonExecutor(additional_authorized_imports=["time"])
    executor.send_tools({"lookup": plain_lookup})
    output = executor(SCRIPT.format(calls=CALLS, seed=seed))
    return float(executor.state["result"] if output.output is None else output.output)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    samples: dict[str, list[float]] = {}
    WARM.warm_up()
    for run in range(args.runs):
        seed = random.Random(run).randrange(10**6)
        jobs: list[tuple[str, Any]] = [
            ("start: run_chain → first line (cold)", lambda: anyio.run(chain_start)),
            ("start: run_chain → first line (warm pool)", lambda: anyio.run(chain_start, WARM)),
            ("start: bare python3 -I -S → first line", bare_start),
            ("start: the sandbox alone (run_confined python3 -c) → first line", sandbox_start),
            ("call: bridged (inside a script)", lambda s=seed: anyio.run(bridged_call, s)),
            ("call: direct ToolInvoker.invoke", lambda s=seed: anyio.run(direct_call, s)),
            ("call: smolagents LocalPythonExecutor", lambda s=seed: smolagents_call(s))]
        random.Random(run).shuffle(jobs)
        for name, job in jobs:
            samples.setdefault(name, []).append(job())
    print(f"Python {sys.version.split()[0]}, {args.runs} interleaved runs; calls: {CALLS} per "
          "run, time per call\n")
    print("| measurement | p50 ms | p95 ms |")
    print("|---|---:|---:|")
    for name, values in samples.items():
        ordered = sorted(values)
        p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
        print(f"| {name} | {statistics.median(values) * 1000:,.3f} | {p95 * 1000:,.3f} |")
    WARM.close()


if __name__ == "__main__":
    main()
