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

With ``--replay``, the cost of resuming a paused run instead: a script makes N calls of the
same tool, then a call that needs a person, and pauses; once it is approved the same script
runs again and its N calls are answered from the run's journal. Measured: a journaled call
answered in the re-run and a live call of the first run (both timed inside the script, per
call), the journal's write at the asking call and its load at the re-run's start (per entry),
and the re-run's wall time against a run of the same N live calls (per call). The journal is
in a SQLite file, or on PostgreSQL with ``--postgres`` (a throwaway server). With
``--policies`` the door has an operator's policy (a plain permit of the tool): any call may then
ask, so each live call of a run that may pause stores its journal entry before it goes on.

Runs interleaved, random arguments, medians.

    python benchmarks/bench_codemode.py [--runs 20]
    python benchmarks/bench_codemode.py --replay [--calls 50] [--postgres] [--policies] [--runs 20]
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

from toolkeeper import ToolInvoker, ToolRisk, tool
from toolkeeper.approval import (
    ApprovalDecision,
    PersistedApprovalHandler,
    PostgresApprovalStore,
    SqliteApprovalStore,
)
from toolkeeper.approval.journal import JournalEntry, journals_of
from toolkeeper.codemode import ToolChainTool
from toolkeeper.core.call import ToolCall
from toolkeeper.invoke import ChainPolicy
from toolkeeper.policy import Policies
from toolkeeper.sandbox.base import Limits
from toolkeeper.sandbox.bubblewrap import run_confined
from toolkeeper.toolbox import Toolbox

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


@tool(risk=ToolRisk.CRITICAL)
async def launch(n: int) -> int:
    """Launch (needs a person)."""
    return n


REPLAY = """
import time
start = time.perf_counter()
for i in range({calls}):
    lookup(key={seed} + i)
print((time.perf_counter() - start) / {calls}, flush=True)
launch(n=1)
"""

LIVE = """
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


def _store(target: str) -> SqliteApprovalStore:
    return PostgresApprovalStore(target) if target.startswith("postgresql://") else \
        SqliteApprovalStore(target)


PERMIT = 'permit (principal, action == Action::"lookup", resource);'


async def replay_run(seed: int, calls: int, target: str, governed: bool = False
                     ) -> dict[str, float]:
    """One paused run and its resumption; the figures of ``--replay`` (seconds)."""
    store, box = _store(target), Toolbox([lookup, launch])
    invoker = ToolInvoker(box, PersistedApprovalHandler(store, wait_s=0),
                          approval_store=store, policy=ChainPolicy(max_tool_calls=10**6),
                          policies=Policies(box, text={"team": PERMIT}) if governed else None)
    chain = ToolChainTool(invoker, policy=ChainPolicy(max_tool_calls=10**6))
    code, session = REPLAY.format(calls=calls, seed=seed), f"client-bench-{seed}"
    first = await chain.run_chain(code, session_id=session)
    assert first.status == "pending" and first.approval_id, first.output_text
    store.decide(ApprovalDecision(request_id=first.approval_id, outcome="approved"))
    started = time.perf_counter()
    again = await chain.run_chain(code, session_id=session)
    rerun = time.perf_counter() - started
    assert again.status == "ok" and sum(r.replayed for r in again.call_trace) == calls
    started = time.perf_counter()
    live = await chain.run_chain(LIVE.format(calls=calls, seed=seed), session_id=session)
    fresh = time.perf_counter() - started
    assert live.status == "ok", live.output_text
    plain = await chain.run_chain(LIVE.format(calls=calls, seed=seed))  # no session: no journal
    assert plain.status == "ok", plain.output_text
    return {"replay: a journaled call, answered from the journal (inside the re-run)":
            float(again.output_text.split()[0]),
            "replay: a live bridged call of the first run (journal kept in memory; "
            f"{'stored at each call' if governed else 'stored at the asking call'})":
            float(first.output_text.split()[0]),
            "replay: a live bridged call of a run with no session (no journal)":
            float(plain.value),  # type: ignore[arg-type]
            "replay: re-run wall time − a run of the same live calls, per journaled call":
            (rerun - fresh) / calls, **_journal_io(store, calls, seed)}


def _journal_io(store: SqliteApprovalStore, calls: int, seed: int) -> dict[str, float]:
    """The journal's write at the asking call and its load at a re-run, per entry."""
    journals = journals_of(store)
    assert journals is not None
    entries = [JournalEntry(seq=n, tool="lookup", args_digest=f"{seed:064x}", line=4,
                            answer={"status": "ok", "text": str(2 * n), "structured":
                                    {"result": 2 * n}, "artifact_ref": None,
                                    "error_code": None, "files": []})
               for n in range(1, calls + 1)]
    run_id = f"run_bench_{seed}"
    started = time.perf_counter()
    journals.write(run_id, session_id="bench", code=REPLAY, entries=entries)
    written = time.perf_counter() - started
    started = time.perf_counter()
    found = journals.load(run_id)
    loaded = time.perf_counter() - started
    assert found is not None and len(found.entries) == calls
    journals.drop(run_id)
    return {"replay: journal written at the asking call, per entry": written / calls,
            "replay: journal loaded at the re-run's start, per entry": loaded / calls}


def replay_main(runs: int, calls: int, postgres: bool, governed: bool) -> None:
    from contextlib import ExitStack

    samples: dict[str, list[float]] = {}
    with ExitStack() as stack, tempfile.TemporaryDirectory() as folder:
        target = str(Path(folder) / "toolkeeper.db")
        if postgres:
            from toolkeeper.testing.postgres import create_database, postgres_server

            target = create_database(stack.enter_context(postgres_server()))
        for run in range(runs):
            seed = random.Random(run).randrange(10**6)
            for name, value in anyio.run(replay_run, seed, calls, target, governed).items():
                samples.setdefault(name, []).append(value)
    print(f"Python {sys.version.split()[0]}, {runs} runs; {calls} journaled calls per run; "
          f"journal on {'PostgreSQL' if postgres else 'SQLite'}"
          f"{'; an operator policy (each live call stored)' if governed else ''}\n")
    _table(samples)


def _table(samples: dict[str, list[float]]) -> None:
    print("| measurement | p50 ms | p95 ms |")
    print("|---|---:|---:|")
    for name, values in samples.items():
        ordered = sorted(values)
        p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
        print(f"| {name} | {statistics.median(values) * 1000:,.3f} | {p95 * 1000:,.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--replay", action="store_true", help="the cost of resuming a run")
    parser.add_argument("--calls", type=int, default=50, help="journaled calls (--replay)")
    parser.add_argument("--postgres", action="store_true", help="the journal on PostgreSQL")
    parser.add_argument("--policies", action="store_true", help="an operator policy (--replay)")
    args = parser.parse_args()
    if args.replay:
        replay_main(args.runs, args.calls, args.postgres, args.policies)
        return
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
    _table(samples)
    WARM.close()


if __name__ == "__main__":
    main()
