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

Runs interleaved, random arguments, medians; each measurement of the start and the calls in a
fresh process, after one warm-up run of the same. ``--before SRC`` runs toolkeeper's
measurements a second time with the code of another checkout's ``src`` folder, in the same
rounds. The bridge's floor: the same frames between a sandboxed ``python3`` and the host's
event loop, answered without the door.

    python benchmarks/bench_codemode.py [--runs 20] [--before SRC]
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
import anyio.to_thread

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
for i in range(20):
    lookup(key=i)
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
    chain = ToolChainTool(_invoker(), policy=ChainPolicy(max_tool_calls=10**6))
    run = await chain.run_chain(SCRIPT.format(calls=CALLS, seed=seed))
    assert run.status == "ok", run.output_text
    return float(run.value)


async def direct_call(seed: int) -> float:
    invoker = _invoker()
    async with invoker.open_session() as session:
        for i in range(20):  # as the script does: the first calls fold the chain
            await invoker.invoke(ToolCall(id="w", name="lookup", arguments={"key": i}),
                                 session=session)
        start = time.perf_counter()
        for i in range(CALLS):
            result = await invoker.invoke(ToolCall(id="c", name="lookup",
                                                   arguments={"key": seed + i}), session=session)
            assert result.ok
        return (time.perf_counter() - start) / CALLS


FLOOR_CHILD = r"""
import marshal, os, sys, time
fd = int(os.environ["FLOOR_FD"])
pending = bytearray()
def exact(size):
    while len(pending) < size:
        pending.extend(os.read(fd, 65536))
    data = bytes(pending[:size])
    del pending[:size]
    return data
def trip(i):
    body = ('{"type":"call","id":%d,"tool":"lookup","arguments":{"key":%d},"line":4,'
            '"secret":"0123456789abcdef0123456789abcdef"}' % (i, i)).encode()
    data = len(body).to_bytes(4, "big") + body
    while data:
        data = data[os.write(fd, data):]
    return marshal.loads(exact(int.from_bytes(exact(4), "big")))
for i in range(20):
    trip(i)
start = time.perf_counter()
for i in range(CALLS):
    trip(i)
print((time.perf_counter() - start) / CALLS)
"""


async def bridge_floor(seed: int) -> float:
    """The floor of a bridged call: the same frames between a sandboxed ``python3`` and this
    event loop (the bridge's own buffered channel), answered without the door — two process
    wake-ups, a JSON parse and a ``marshal`` write per call."""
    import json
    import marshal
    import socket

    from toolkeeper.codemode.channel import Channel

    host, child = socket.socketpair()
    host.setblocking(False)
    channel = Channel(host)
    channel.open()

    def child_run() -> str:
        with tempfile.TemporaryDirectory() as scratch:
            os.chmod(scratch, 0o777)
            out = run_confined(Path(scratch), ["/usr/bin/python3", "-I", "-S", "-c",
                                               FLOOR_CHILD.replace("CALLS", str(CALLS))],
                               env={"FLOOR_FD": str(child.fileno())},
                               pass_fds=(child.fileno(),),
                               limits=Limits(processes=32, memory=512 << 20,
                                             file_bytes=16 << 20))
        child.close()
        return out.stdout

    async def answer() -> None:
        while (head := await channel.exact(4)) is not None:
            frame = json.loads(await channel.exact(int.from_bytes(head, "big")) or b"{}")
            reply = marshal.dumps({"status": "ok", "text": str(2 * frame["arguments"]["key"]),
                                   "structured": {"result": 2 * frame["arguments"]["key"]},
                                   "artifact_ref": None, "error_code": None, "files": []}, 4)
            host.sendall(len(reply).to_bytes(4, "big") + reply)

    async with anyio.create_task_group() as group:
        group.start_soon(answer)
        out = await anyio.to_thread.run_sync(child_run)
        channel.close()
        host.close()
        group.cancel_scope.cancel()
    return float(out.split()[-1]) if seed >= 0 else 0.0


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
    """Medians with their spread: the middle half of the runs (p25–p75) and the p99."""
    print("| measurement | p50 ms | p25–p75 ms | p99 ms |")
    print("|---|---:|---:|---:|")
    for name, values in samples.items():
        ordered = sorted(values)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        low, _, high = statistics.quantiles(values, n=4) if len(values) > 1 else values * 3
        print(f"| {name} | {statistics.median(values) * 1000:,.3f} | "
              f"{low * 1000:,.3f}–{high * 1000:,.3f} | {p99 * 1000:,.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--replay", action="store_true", help="the cost of resuming a run")
    parser.add_argument("--calls", type=int, default=50, help="journaled calls (--replay)")
    parser.add_argument("--postgres", action="store_true", help="the journal on PostgreSQL")
    parser.add_argument("--policies", action="store_true", help="an operator policy (--replay)")
    parser.add_argument("--before", metavar="SRC", help="also run toolkeeper's measurements "
                        "with the code of this src folder (an older checkout), side by side")
    parser.add_argument("--only", metavar="WORDS", help="only the measurements whose name "
                        "holds these words (\"cold\", \"start\", \"call\")")
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(one(args.one[0], int(args.one[1])))
        return
    if args.replay:
        replay_main(args.runs, args.calls, args.postgres, args.policies)
        return
    jobs = [name for name in JOBS if not args.only or args.only in name]
    if args.before:
        jobs += [f"{name} (before)" for name in BEFORE if name in jobs]
    samples: dict[str, list[float]] = {}
    load_at_start = os.getloadavg()[0]
    for run in range(args.runs):
        seed = random.Random(run).randrange(10**6)
        order = jobs[:]
        random.Random(run).shuffle(order)
        for name in order:
            base = name.removesuffix(" (before)")
            value = _one(base, seed, args.before if base != name else None)
            if value is not None:
                samples.setdefault(name, []).append(value)
    load = os.getloadavg()[0]
    print(f"{time.strftime('%Y-%m-%d')}, Python {sys.version.split()[0]}, {args.runs} "
          f"interleaved runs, each measurement in a fresh process after one warm-up; calls: "
          f"{CALLS} per run after 20 untimed, time per call; load average "
          f"{load_at_start:.1f} at the start, {load:.1f} at the end\n")
    _table({name: samples[name] for name in jobs if name in samples})


JOBS: dict[str, Any] = {
    "start: run_chain → first line (cold)": lambda seed: anyio.run(chain_start),
    "start: run_chain → first line (warm pool)": lambda seed: anyio.run(chain_start, WARM),
    "start: bare python3 -I -S → first line": lambda seed: bare_start(),
    "start: the sandbox alone (run_confined python3 -c) → first line":
        lambda seed: sandbox_start(),
    "call: bridged (inside a script)": lambda seed: anyio.run(bridged_call, seed),
    "call: direct ToolInvoker.invoke": lambda seed: anyio.run(direct_call, seed),
    "call: the bridge's floor (the same frames to and from a sandbox, no door)":
        lambda seed: anyio.run(bridge_floor, seed),
    "call: smolagents LocalPythonExecutor": smolagents_call,
}
BEFORE = ("start: run_chain → first line (cold)", "start: run_chain → first line (warm pool)",
          "call: bridged (inside a script)", "call: direct ToolInvoker.invoke")
"""The measurements whose code is toolkeeper's (``--before`` runs them with an older one)."""


def _one(name: str, seed: int, src: str | None) -> float | None:
    """One measurement in a fresh process (with the code of ``src`` when given)."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src
    out = subprocess.run([sys.executable, __file__, "--one", name, str(seed)],
                         capture_output=True, text=True, check=False, env=env)
    if out.returncode != 0:
        print(f"{name} failed: {out.stderr.strip()[-500:]}", file=sys.stderr)
        return None
    return float(out.stdout.strip().splitlines()[-1])


def one(name: str, seed: int) -> float:
    """One measurement after a warm-up of the same (the first run of a process loads what
    later runs find loaded; where toolkeeper keeps a spare launch gate, the measurement waits
    until the one the warm-up began preparing is ready). The warm pool's measurement takes a sandbox started before a cold
    run, which is its warm-up: the pool's sandbox has long loaded its prelude by then."""
    job = JOBS[name]
    if "warm pool" in name:
        WARM.warm_up()
        anyio.run(chain_start)
    else:
        job(seed)
    try:  # the spare launch gate the warm-up's take began preparing (code that has one)
        from toolkeeper.sandbox.spare import spares
    except ImportError:
        pass
    else:
        spares.wait_ready(5.0)
    value = float(job(seed))
    WARM.close()
    return value


if __name__ == "__main__":
    main()
