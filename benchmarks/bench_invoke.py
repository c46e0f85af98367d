"""Benchmark: the cost of one governed tool call, against the peers' own call paths.

Side by side in one process run: toolkeeper's full default door (``ToolInvoker.invoke`` with
validation, hooks and the trace on, no approval needed) on a trivial SAFE tool ``add(a, b)``;
openai-agents ``FunctionTool.on_invoke_tool``; toolregistry ``ainvoke`` / ``Tool.run``;
pydantic-ai ``ToolManager.handle_call``; and the floor, pydantic ``TypeAdapter.validate_python``
plus the call. Also: lookup by name at 10 and 10,000 tools, and audit throughput under 1,000
concurrent invocations with the SQLite audit log.

    python benchmarks/bench_invoke.py [--calls 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from toolkeeper import HookEvent, HookManager, Tool, ToolCall, ToolInvoker
from toolkeeper.invoke import ChainPolicy
from toolkeeper.invoke.audit import SqliteAuditLog
from toolkeeper.toolbox import Toolbox

Runner = Callable[[], Awaitable[Any]]


def add(a: int, b: int) -> int:
    return a + b


async def aadd(a: int, b: int) -> int:
    return a + b


def ours(kind: str) -> Runner:
    func = aadd if kind == "async" else add
    metadata = {"inline": True} if kind == "inline" else {}
    from toolkeeper import ToolMetadata

    tool = Tool.from_function(func, name="add", metadata=ToolMetadata(**metadata))
    hooks = HookManager()
    hooks.register(HookEvent.TOOL_START, lambda e, p: None)
    hooks.register(HookEvent.TOOL_END, lambda e, p: None)
    invoker = ToolInvoker(Toolbox([tool]), policy=ChainPolicy(max_tool_calls=10**9), hooks=hooks)
    session = invoker.open_session()
    call = ToolCall(id="c1", name="add", arguments={"a": 1, "b": 2})

    async def run() -> Any:
        result = await invoker.invoke(call, session=session)
        if len(session._trace) > 10_000:  # keep memory flat over a long benchmark
            session._trace.clear()
        return result

    return run


def floor() -> Runner:
    from pydantic import TypeAdapter
    from typing_extensions import TypedDict

    class Args(TypedDict):
        a: int
        b: int

    adapter = TypeAdapter(Args)
    payload = {"a": 1, "b": 2}

    async def run() -> Any:
        return add(**adapter.validate_python(payload))

    return run


def openai_agents(kind: str) -> Runner:
    from agents import function_tool
    from agents.tool_context import ToolContext

    tool = function_tool(aadd if kind == "async" else add)
    payload = json.dumps({"a": 1, "b": 2})
    ctx = ToolContext(context=None, tool_name=tool.name, tool_call_id="c1", tool_arguments=payload)

    async def run() -> Any:
        return await tool.on_invoke_tool(ctx, payload)

    return run


def toolregistry(kind: str) -> Runner:
    from toolregistry import ToolRegistry

    registry = ToolRegistry()
    registry.register(aadd if kind == "async" else add, name="add")
    if kind == "inline":
        tool = registry.get_tool("add")

        async def run_inline() -> Any:
            return tool.run({"a": 1, "b": 2})

        return run_inline

    async def run() -> Any:
        return await registry.ainvoke("add", {"a": 1, "b": 2})

    return run


def pydantic_ai(kind: str) -> Runner:
    from pydantic_ai import RunContext
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.tool_manager import ToolManager
    from pydantic_ai.toolsets import FunctionToolset
    from pydantic_ai.usage import RunUsage

    ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())
    manager = anyio.run(ToolManager(FunctionToolset([aadd if kind == "async" else add]))
                        .for_run_step, ctx)
    part = ToolCallPart(tool_name=(aadd if kind == "async" else add).__name__,
                        args={"a": 1, "b": 2}, tool_call_id="c1")

    async def run() -> Any:
        return await manager.handle_call(part)

    return run


def per_call_us(runner: Runner, calls: int, rounds: int) -> float:
    async def measure() -> float:
        for _ in range(200):
            await runner()
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            for _ in range(calls):
                await runner()
            times.append((time.perf_counter() - start) / calls * 1e6)
        return statistics.median(times)

    return anyio.run(measure)


def handoffs() -> dict[str, Runner]:
    """The bare thread hand-off of a no-op function, without any tool layer around it."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from toolkeeper.tools.threads import run_in_worker

    executor = ThreadPoolExecutor(4)

    def noop() -> None:
        return None

    async def pool() -> Any:
        return await run_in_worker(noop)

    async def to_thread() -> Any:
        return await anyio.to_thread.run_sync(noop)

    async def executor_run() -> Any:
        return await asyncio.get_running_loop().run_in_executor(executor, noop)

    return {"toolkeeper worker pool": pool, "anyio.to_thread.run_sync": to_thread,
            "loop.run_in_executor": executor_run}


def lookup_us(size: int) -> float:
    tools = [Tool(name=f"tool_{i}", parameters={"type": "object", "properties": {}})
             for i in range(size)]
    box = Toolbox(tools)
    names = [f"tool_{i}" for i in range(0, size, max(1, size // 100))]
    start = time.perf_counter()
    for _ in range(1000):
        for name in names:
            box.get(name)
    return (time.perf_counter() - start) / (1000 * len(names)) * 1e6


def audit_throughput() -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        results = {}
        for label, audit in (("none", None), ("sqlite", SqliteAuditLog(Path(tmp) / "a.db"))):
            invoker = ToolInvoker(Toolbox([Tool.from_function(aadd, name="add")]), audit=audit,
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    rows: list[tuple[str, str, float]] = []
    peers = {"openai-agents": openai_agents, "toolregistry": toolregistry,
             "pydantic-ai-slim": pydantic_ai}
    for kind in ("async", "thread", "inline"):
        rows.append((kind, "toolkeeper", per_call_us(ours(kind), args.calls, args.rounds)))
        for name, make in peers.items():
            if kind == "inline" and name != "toolregistry":
                continue
            try:
                rows.append((kind, name, per_call_us(make(kind), args.calls, args.rounds)))
            except Exception as exc:  # a peer's API moved: say so, keep the others
                print(f"skipping {name} ({kind}): {exc!r}", file=sys.stderr)
    rows.append(("floor", "pydantic TypeAdapter + call", per_call_us(floor(), args.calls,
                                                                      args.rounds)))
    for name, runner in handoffs().items():
        rows.append(("bare hand-off", name, per_call_us(runner, args.calls, args.rounds)))
    print(f"Python {sys.version.split()[0]}, {args.calls} calls x {args.rounds} rounds (median)\n")
    print("| tool kind | call path | µs per call | ÷ toolkeeper |")
    print("|---|---|---:|---:|")
    ours_by_kind = {kind: us for kind, name, us in rows if name == "toolkeeper"}
    for kind, name, us in rows:
        base = ours_by_kind.get(kind, ours_by_kind["async"])
        print(f"| {kind} | {name} | {us:.2f} | {us / base:.2f}x |")
    print(f"\nlookup by name: {lookup_us(10):.3f} µs at 10 tools, {lookup_us(10_000):.3f} µs at "
          "10,000 tools")
    bare, audited = audit_throughput()
    print(f"1,000 concurrent invocations: {bare:,.0f}/s without audit, {audited:,.0f}/s with the "
          "SQLite audit log")


if __name__ == "__main__":
    main()
