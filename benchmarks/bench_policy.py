"""Benchmark: what a policy check costs a call, and how soon a stored rule decides elsewhere.

- The check alone (``Policies.decide``) for one tool's call, with the default set only (no
  Cedar), 10 rules and 1,000 rules (spread over 100 tools, 10 each, every one reading the
  call's arguments, plus global ones): p50 and p99 over many calls with arguments drawn at
  random. Beside it, 1,000 rules in one Cedar set without the per-tool index.
- The door (``ToolInvoker.invoke`` of a SAFE tool, every default gate) without policies and with
  10 and 1,000 rules, in the same run.
- Time to effect: two ``Policies`` watching one PostgreSQL store (each its own connections); a
  rule saved through one, the other asked until the rule decides.

    python benchmarks/bench_policy.py [--calls 5000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time

import anyio

from toolkeeper import Tool, Toolbox, ToolCall, ToolInvoker
from toolkeeper.core.context import Caller
from toolkeeper.invoke import ChainPolicy
from toolkeeper.policy import Policies, PolicyRule, PolicyStore

LIMITS = ChainPolicy(max_tool_calls=10**9, total_timeout_s=10**9)
CALLER = Caller(client="ci", channel="mcp")


def _catalog(count: int = 100) -> Toolbox:
    """``count`` SAFE tools ``tool0`` … with a path and a size argument."""
    def act(path: str, size: int = 0) -> str:
        return path

    return Toolbox([Tool.from_function(act, name=f"tool{i}", description="Act.")
                    for i in range(count)])


def _rules(count: int, tools: int = 100) -> str:
    parts = []
    for i in range(count):
        tool = f"tool{i % tools}"
        effect = "forbid" if i % 3 == 0 else "permit"
        parts.append(f'@id("r{i}")\n{effect} (principal, action == Action::"{tool}", resource)\n'
                     f'when {{ context.args.path like "dir{i}/*" }};')
    parts.append('@id("nobody-on-weekends") forbid (principal == Client::"nobody", action, '
                 'resource);')
    return "\n".join(parts)


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return (statistics.median(ordered) * 1e6, ordered[int(len(ordered) * 0.99)] * 1e6)


def check(rules: int, calls: int) -> tuple[float, float]:
    box = _catalog()
    policies = Policies(box, text={"bench": _rules(rules)} if rules else None,
                        defaults=True)
    if rules:
        policies.load()
    tool = box.get("tool7")
    assert tool is not None
    samples = []
    for _ in range(calls):
        args = {"path": f"dir{random.randrange(2000)}/x", "size": random.randrange(99)}
        start = time.perf_counter()
        policies.decide(tool, CALLER, args, limits=LIMITS, chain=False)
        samples.append(time.perf_counter() - start)
    return _percentiles(samples[calls // 10:])


def unindexed(calls: int) -> tuple[float, float]:
    import cedarpy

    from toolkeeper.policy.schema import client_entity, tool_entity
    box = _catalog()
    tool = box.get("tool7")
    assert tool is not None
    policies = cedarpy.PolicySet.from_str(_rules(1000))
    entities = cedarpy.Entities.from_json_str(json.dumps([
        client_entity(CALLER), tool_entity(tool),
        {"uid": {"type": "Action", "id": "tool7"}, "attrs": {}, "parents": []}]))
    samples = []
    for _ in range(calls):
        request = {"principal": {"type": "Client", "id": "ci"},
                   "action": {"type": "Action", "id": "tool7"},
                   "resource": {"type": "Tool", "id": "tool7"},
                   "context": {"args": {"path": f"dir{random.randrange(2000)}/x"}}}
        start = time.perf_counter()
        cedarpy.is_authorized(request, policies, entities)
        samples.append(time.perf_counter() - start)
    return _percentiles(samples[calls // 10:])


def door(rules: int | None, calls: int) -> tuple[float, float]:
    box = _catalog()
    policies = None
    if rules is not None:
        policies = Policies(box, text={"bench": _rules(rules)} if rules else {"none": ""})
        policies.load()
    invoker = ToolInvoker(box, policy=LIMITS, policies=policies, audit=None)

    async def run() -> list[float]:
        samples = []
        async with invoker.open_session(caller=CALLER) as session:
            for i in range(calls):
                call = ToolCall(id=f"c{i}", name="tool7", arguments={
                    "path": f"dir{random.randrange(2000)}/x"})
                start = time.perf_counter()
                await invoker.invoke(call, session=session)
                samples.append(time.perf_counter() - start)
                session._trace.clear()
        return samples

    samples = anyio.run(run)
    return _percentiles(samples[calls // 10:])


def time_to_effect(rounds: int) -> list[float]:
    from toolkeeper.testing.postgres import create_database, postgres_server

    with postgres_server() as base:
        url = create_database(base)
        box = _catalog()
        writer, reader = PolicyStore(url), Policies(box, store=PolicyStore(url))
        reader.load()
        reader.watch()
        tool = box.get("tool7")
        assert tool is not None
        taken = []
        for i in range(rounds):
            args = {"path": f"effect{i}"}
            assert reader.decide(tool, CALLER, args, limits=LIMITS, chain=False).outcome \
                == "allow"
            rule = PolicyRule(id=PolicyRule.new_id(), author="bench", reason="",
                              created=time.time(), cedar='forbid (principal, action == '
                              f'Action::"tool7", resource) when {{ context.args.path == '
                              f'"effect{i}" }};')
            start = time.perf_counter()
            writer.add(rule)
            while reader.decide(tool, CALLER, args, limits=LIMITS, chain=False).outcome \
                    != "deny":
                if time.perf_counter() - start > 30:
                    raise SystemExit("a stored rule did not decide within 30 s")
                time.sleep(0.005)
            taken.append((time.perf_counter() - start) * 1000)
        reader.close()
        return taken


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=10)
    options = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d')}")
    print("| measurement | p50 µs | p99 µs |\n|---|---:|---:|")
    for label, run in [
        ("check, default set only (no Cedar)", lambda: check(0, options.calls)),
        ("check, 10 rules", lambda: check(10, options.calls)),
        ("check, 1,000 rules (indexed per tool)", lambda: check(1000, options.calls)),
        ("1,000 rules in one Cedar set, no index", lambda: unindexed(options.calls)),
        ("door, no policies", lambda: door(None, options.calls)),
        ("door, policies given, none written", lambda: door(0, options.calls)),
        ("door, 10 rules", lambda: door(10, options.calls)),
        ("door, 1,000 rules", lambda: door(1000, options.calls)),
    ]:
        p50, p99 = run()
        print(f"| {label} | {p50:.1f} | {p99:.1f} |", flush=True)
    taken = time_to_effect(options.rounds)
    print(f"time to effect on another watcher (PostgreSQL, {len(taken)} rules): median "
          f"{statistics.median(taken):.0f} ms, max {max(taken):.0f} ms")


if __name__ == "__main__":
    main()
