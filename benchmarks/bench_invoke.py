"""Benchmark: the cost of one governed tool call, against the peers' own call paths.

Every call path starts where a provider leaves it: the JSON arguments string the model sent, a
fresh call id, and whatever per-call object the library's own runner makes for a call (a new
``ToolContext`` for openai-agents, a ``ToolCallPart`` for pydantic-ai, a ``ToolCall`` for
toolkeeper). Arguments are drawn at random. The tool is the same trivial ``add(a, b)``.

- toolkeeper: ``ToolInvoker.invoke`` with every default gate (budget, validation, trace, timeout,
  …), no hooks registered, a SAFE tool (no approval).
- openai-agents: ``FunctionTool.on_invoke_tool`` with a new ``ToolContext`` per call (what its
  runner does).
- toolregistry: ``ToolRegistry.ainvoke``; pydantic-ai: ``ToolManager.handle_call``.
- the floor: ``json.loads`` + pydantic ``TypeAdapter.validate_python`` + the call.

Each call path runs in its own fresh process; rounds are interleaved (every path once per round,
in a shuffled order) and the median of the rounds is reported. Also: lookup by name at 10,000
tools with names drawn at random from all of them (against a plain ``dict``), and audit
throughput under 1,000 concurrent invocations with the SQLite audit log.

Each process times its calls one by one too (p50, p99). ``--before SRC`` runs toolkeeper's
paths a second time with the code of another checkout's ``src`` folder, side by side in the
same rounds; ``--only-door`` runs only the async door and the floor.

    python benchmarks/bench_invoke.py [--calls 20000] [--rounds 5] [--before SRC] [--only-door]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

Runner = Callable[[int], Awaitable[Any]]
PAYLOADS: list[str] = []


def add(a: int, b: int) -> int:
    return a + b


async def aadd(a: int, b: int) -> int:
    return a + b


def ours(kind: str) -> Runner:
    from toolkeeper import Tool, ToolCall, ToolInvoker, ToolMetadata
    from toolkeeper.invoke import ChainPolicy

    func = aadd if kind == "async" else add
    tool = Tool.from_function(func, name="add",
                              metadata=ToolMetadata(inline=kind == "inline"))
    invoker = ToolInvoker([tool], policy=ChainPolicy(max_tool_calls=10**9,
                                                     total_timeout_s=10**9))
    session = invoker.open_session()

    async def run(i: int) -> Any:
        call = ToolCall(id=f"c{i}", name="add", arguments=json.loads(PAYLOADS[i]))
        result = await invoker.invoke(call, session=session)
        if len(session._trace) > 10_000:  # keep memory flat over a long benchmark
            session._trace.clear()
        return result

    return run


def floor(kind: str) -> Runner:
    from pydantic import TypeAdapter
    from typing_extensions import TypedDict

    class Args(TypedDict):
        a: int
        b: int

    adapter = TypeAdapter(Args)

    async def run(i: int) -> Any:
        return await aadd(**adapter.validate_python(json.loads(PAYLOADS[i])))

    return run


def openai_agents(kind: str) -> Runner:
    from agents import function_tool
    from agents.tool_context import ToolContext

    tool = function_tool(aadd if kind == "async" else add)

    async def run(i: int) -> Any:
        payload = PAYLOADS[i]
        ctx = ToolContext(context=None, tool_name=tool.name, tool_call_id=f"c{i}",
                          tool_arguments=payload)
        return await tool.on_invoke_tool(ctx, payload)

    return run


def toolregistry(kind: str) -> Runner:
    from toolregistry import ToolRegistry

    registry = ToolRegistry()
    registry.register(aadd if kind == "async" else add, name="add")

    async def run(i: int) -> Any:
        return await registry.ainvoke("add", json.loads(PAYLOADS[i]))

    return run


def pydantic_ai(kind: str) -> Runner:
    from pydantic_ai import RunContext
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.tool_manager import ToolManager
    from pydantic_ai.toolsets import FunctionToolset
    from pydantic_ai.usage import RunUsage

    func = aadd if kind == "async" else add
    ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())
    manager = anyio.run(ToolManager(FunctionToolset([func])).for_run_step, ctx)

    async def run(i: int) -> Any:
        part = ToolCallPart(tool_name=func.__name__, args=PAYLOADS[i], tool_call_id=f"c{i}")
        return await manager.handle_call(part)

    return run


RUNNERS: dict[str, Callable[[str], Runner]] = {
    "toolkeeper": ours, "openai-agents": openai_agents, "toolregistry": toolregistry,
    "pydantic-ai-slim": pydantic_ai, "floor: json + pydantic TypeAdapter + await": floor,
}
KINDS = {"toolkeeper": ("async", "thread"), "openai-agents": ("async", "thread"),
         "toolregistry": ("async", "thread"), "pydantic-ai-slim": ("async", "thread"),
         "floor: json + pydantic TypeAdapter + await": ("async",)}


def one_process(name: str, kind: str, calls: int, seed: int) -> tuple[float, float, float]:
    """µs per call of one call path, measured in this (fresh) process: the mean over the timed
    loop, and the median and 99th percentile of the calls timed one by one."""
    rng = random.Random(seed)
    PAYLOADS[:] = [json.dumps({"a": rng.randrange(10**6), "b": rng.randrange(10**6)})
                   for _ in range(calls + 500)]
    runner = RUNNERS[name](kind)

    async def measure() -> tuple[float, float, float]:
        for i in range(calls, calls + 500):  # warm-up on inputs the timed loop does not reuse
            await runner(i)
        clock = time.perf_counter_ns
        each = [0] * calls
        start = time.perf_counter()
        for i in range(calls):
            began = clock()
            await runner(i)
            each[i] = clock() - began
        mean = (time.perf_counter() - start) / calls * 1e6
        each.sort()
        return mean, each[calls // 2] / 1e3, each[calls * 99 // 100] / 1e3

    return anyio.run(measure)


def lookup_ns(size: int, lookups: int = 200_000) -> tuple[float, float]:
    """ns per ``Toolbox.get`` and per plain ``dict.get``, names drawn at random from all."""
    from toolkeeper import Tool
    from toolkeeper.toolbox import Toolbox

    tools = [Tool(name=f"tool_{i}", parameters={"type": "object", "properties": {}})
             for i in range(size)]
    box = Toolbox(tools)
    plain = {t.name: t for t in tools}
    rng = random.Random(7)
    names = [f"tool_{rng.randrange(size)}" for _ in range(lookups)]
    results = {}
    for label, get in (("toolbox", box.get), ("dict", plain.get)):
        best = []
        for _ in range(5):
            start = time.perf_counter()
            for name in names:
                get(name)
            best.append((time.perf_counter() - start) / lookups * 1e9)
        results[label] = statistics.median(best)
    return results["toolbox"], results["dict"]


def audit_throughput() -> tuple[float, float]:
    from toolkeeper import Tool, ToolCall, ToolInvoker
    from toolkeeper.invoke import ChainPolicy
    from toolkeeper.invoke.audit import SqliteAuditLog

    with tempfile.TemporaryDirectory() as tmp:
        results = {}
        for label, audit in (("none", None), ("sqlite", SqliteAuditLog(Path(tmp) / "a.db"))):
            invoker = ToolInvoker([Tool.from_function(aadd, name="add")], audit=audit,
                                  policy=ChainPolicy(max_tool_calls=10**6))

            async def burst(inv: ToolInvoker = invoker) -> float:
                session = inv.open_session()
                start = time.perf_counter()

                async def one(i: int) -> None:
                    await inv.invoke(ToolCall(id=str(i), name="add", arguments={"a": i, "b": 1}),
                                     session=session)

                async with anyio.create_task_group() as group:
                    for i in range(1000):
                        group.start_soon(one, i)
                return 1000 / (time.perf_counter() - start)

            results[label] = statistics.median(anyio.run(burst) for _ in range(3))
        return results["none"], results["sqlite"]


FLOOR = "floor: json + pydantic TypeAdapter + await"


def _paths(before: str | None) -> list[tuple[str, str, str | None]]:
    """(call path, tool kind, the ``src`` folder of the code it runs: ``None`` for this one)."""
    paths: list[tuple[str, str, str | None]] = [
        (name, kind, None) for name in RUNNERS for kind in KINDS[name]]
    if before:
        paths += [("toolkeeper", kind, before) for kind in KINDS["toolkeeper"]]
    return paths


def _run_one(name: str, kind: str, src: str | None, calls: int, seed: int
             ) -> tuple[float, float, float] | None:
    env = dict(os.environ)
    if src is not None:  # the code as it was: its src folder ahead of the installed one
        env["PYTHONPATH"] = src
    out = subprocess.run([sys.executable, __file__, "--calls", str(calls), "--one", name, kind,
                          str(seed)], capture_output=True, text=True, check=False, env=env)
    if out.returncode != 0:
        print(f"{name} ({kind}) failed: {out.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    mean, p50, p99 = json.loads(out.stdout.strip().splitlines()[-1])
    return mean, p50, p99


def _print_table(samples: dict[tuple[str, str, str | None], list[tuple[float, float, float]]]
                 ) -> None:
    print("| tool kind | call path | µs per call (mean) | p50 µs | p99 µs | ÷ toolkeeper "
          "(mean) | ÷ the floor (p50) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    medians = {p: tuple(statistics.median(s[i] for s in v) for i in range(3))
               for p, v in samples.items() if v}
    floor = medians.get((FLOOR, "async", None))
    for (name, kind, src), (mean, p50, p99) in medians.items():
        base = medians.get(("toolkeeper", kind, None), medians[("toolkeeper", "async", None)])
        label = f"{name} (before)" if src else name
        over = f"{p50 / floor[1]:.1f}x" if floor and kind == "async" else ""
        print(f"| {kind} | {label} | {mean:.2f} | {p50:.2f} | {p99:.2f} | {mean / base[0]:.2f}x "
              f"| {over} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", metavar="SRC",
                        help="also run toolkeeper's paths with the code of this src folder (a "
                        "checkout of an older commit), side by side")
    parser.add_argument("--only-door", action="store_true",
                        help="toolkeeper's async path and the floor only (no peers, no lookup "
                        "or audit figures)")
    parser.add_argument("--one", nargs=3, metavar=("NAME", "KIND", "SEED"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.one:
        name, kind, seed = args.one
        print(json.dumps(one_process(name, kind, args.calls, int(seed))))
        return
    paths = _paths(args.before)
    if args.only_door:
        paths = [p for p in paths if p[1] == "async" and p[0] in ("toolkeeper", FLOOR)]
    samples: dict[tuple[str, str, str | None], list[tuple[float, float, float]]] = {
        p: [] for p in paths}
    for round_ in range(args.rounds):
        order = paths[:]
        random.Random(round_).shuffle(order)
        for name, kind, src in order:
            found = _run_one(name, kind, src, args.calls, round_)
            if found is not None:
                samples[(name, kind, src)].append(found)
    print(f"{time.strftime('%Y-%m-%d')}, Python {sys.version.split()[0]}, {args.calls} calls per "
          f"process, {args.rounds} interleaved rounds, one process per call path per round "
          f"(median of the rounds), load average {os.getloadavg()[0]:.1f}\n")
    _print_table(samples)
    if args.only_door:
        return
    box, plain = lookup_ns(10_000)
    print(f"\nlookup by name at 10,000 tools, names drawn at random: Toolbox.get {box:.0f} ns, "
          f"dict.get {plain:.0f} ns")
    bare, audited = audit_throughput()
    print(f"1,000 concurrent invocations: {bare:,.0f}/s without audit, {audited:,.0f}/s with the "
          "SQLite audit log")


if __name__ == "__main__":
    main()
