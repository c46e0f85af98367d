"""Benchmark: what the gateway adds over calling an upstream MCP server directly.

The upstream is a bare official-SDK low-level server offering ``add(a, b)`` (text plus
structured content under an output schema), run as its own process over stdio. Measured side
by side in one run, calls one after another with random arguments, rounds interleaved:

- in process: ``client.call_tool`` on the SDK client connected to the upstream, against
  ``ToolInvoker.invoke`` of the gateway's ``up-add`` (the full default door: lookup,
  validation, approval check, timeout, audit in SQLite, result conversion) over the same kind
  of connection — the gateway's own cost; and the same without the audit log (its share);
- end to end: an MCP client calling the upstream over stdio, against the same client calling
  ``toolkeeper serve``-style gateway (``mcp_server`` with the gateway attached) over stdio,
  which calls the upstream — the cost a client sees, one more process hop included.

- the floor: the same client calling a bare SDK relay (the SDK's low-level server forwarding
  each call through an SDK client, no door) — what the second hop alone costs;
- ``toolkeeper serve`` as its users run it: one kept-alive official client over Streamable
  HTTP calling the real ``toolkeeper serve`` process (SQLite audit on as shipped, ``--auth
  none``, ``--rate-limit 0``) whose ``[[mcp.servers]]`` lists the upstream, against the same
  client calling the upstream directly — the upstream over its own Streamable HTTP (the same
  bare server in JSON response mode on loopback) in one group, over stdio in the other.

The serve groups also report the CPU time each process (the client, serve, the upstream)
spent a call, the median of the rounds: on a machine whose cores are all busy, a call's
latency is mostly the sum of these.

Each measurement runs in fresh processes; ``--before SRC`` runs the gateway a second time with
the code of another checkout's ``src`` folder, in the same rounds; ``--only`` picks groups
(``in-process``, ``end-to-end``, ``serve-http``, ``serve-stdio``).

    python benchmarks/bench_gateway.py [--calls 500] [--rounds 3] [--before SRC] [--only ...]
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
from pathlib import Path
from typing import Any

import anyio
from upstreams import start_http_upstream

HERE = Path(__file__).resolve()


def _upstream_params() -> Any:
    from mcp import StdioServerParameters

    return StdioServerParameters(command=sys.executable, args=[str(HERE), "--upstream"])


def _config() -> Any:
    from toolkeeper.config import MCPServerConfig

    # Not in the OS sandbox: the sandbox's user cannot reach this interpreter when it lives
    # under /root, and the sandbox changes the upstream's start, not a call's path.
    return MCPServerConfig(name="up", command=sys.executable, args=[str(HERE), "--upstream"],
                           risk="safe", connect_timeout_s=60, sandbox=False)


def upstream() -> None:
    """The upstream process: bench_mcp's bare SDK server (the same add), over stdio."""
    from bench_mcp import bare_server
    from mcp.server.stdio import stdio_server

    server = bare_server()

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


def gateway_server() -> None:
    """The gateway process: toolkeeper's MCP server with the upstream attached, over stdio."""
    from toolkeeper import ToolInvoker
    from toolkeeper.invoke import ChainPolicy
    from toolkeeper.mcp.gateway import MCPGateway
    from toolkeeper.mcp.server import serve_stdio
    from toolkeeper.toolbox import Toolbox

    invoker = ToolInvoker(Toolbox(), policy=ChainPolicy(max_tool_calls=10**9,
                                                       total_timeout_s=10.0**9))
    serve_stdio(invoker, gateway=MCPGateway([_config()]))


def relay_server() -> None:
    """The floor of any gateway on the SDK: its low-level server whose ``call_tool`` forwards
    each call to the upstream through an SDK client — no door (no validation, budget, approval,
    audit or result conversion), nothing but the second hop."""
    import mcp_types as types
    from mcp import Client
    from mcp.server.lowlevel.server import Server
    from mcp.server.stdio import stdio_server

    async def run() -> None:
        async with Client(_upstream_params()) as client:
            listed = [tool.model_copy(update={"name": f"up-{tool.name}"})
                      for tool in (await client.list_tools()).tools]

            async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
                return types.ListToolsResult(tools=listed)

            async def call_tool(_ctx: Any, params: types.CallToolRequestParams
                                ) -> types.CallToolResult:
                result: types.CallToolResult = await client.call_tool(
                    params.name.removeprefix("up-"), params.arguments or {})
                return result

            server = Server("relay", on_list_tools=list_tools, on_call_tool=call_tool)
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


async def _timed(call: Any, calls: int, rng: random.Random, cpu: Any = None) -> list[float]:
    for _ in range(20):
        await call(1, 2)
    if cpu is not None:
        cpu.start()
    times = []
    for _ in range(calls):
        a, b = rng.randrange(10**6), rng.randrange(10)
        start = time.perf_counter()
        await call(a, b)
        times.append(time.perf_counter() - start)
    if cpu is not None:
        cpu.stop(calls)
    return times


async def in_process(kind: str, calls: int, rng: random.Random) -> list[float]:
    from mcp import Client

    from toolkeeper import ToolInvoker
    from toolkeeper.core.call import ToolCall
    from toolkeeper.invoke import ChainPolicy
    from toolkeeper.invoke.audit import SqliteAuditLog
    from toolkeeper.mcp.gateway import MCPGateway
    from toolkeeper.toolbox import Toolbox

    if kind == "direct":
        async with Client(_upstream_params()) as client:
            async def direct(a: int, b: int) -> None:
                result = await client.call_tool("add", {"a": a, "b": b})
                assert not result.is_error
            return await _timed(direct, calls, rng)
    toolbox = Toolbox()
    with tempfile.TemporaryDirectory() as state:
        audit = SqliteAuditLog(Path(state) / "audit.db") if kind == "gateway" else None
        invoker = ToolInvoker(toolbox, policy=ChainPolicy(max_tool_calls=10**9,
                                                          total_timeout_s=10.0**9), audit=audit)
        async with MCPGateway([_config()]) as gateway, invoker.open_session() as session:
            await gateway.attach(toolbox)

            async def governed(a: int, b: int) -> None:
                result = await invoker.invoke(
                    ToolCall(id="c", name="up-add", arguments={"a": a, "b": b}),
                    session=session)
                assert result.ok, result.text
            return await _timed(governed, calls, rng)


async def end_to_end(kind: str, calls: int, rng: random.Random) -> list[float]:
    from mcp import Client, StdioServerParameters

    params = _upstream_params() if kind == "direct" else StdioServerParameters(
        command=sys.executable, args=[str(HERE), "--relay" if kind == "relay" else "--gateway"],
        env=dict(os.environ))
    name = "add" if kind == "direct" else "up-add"
    async with Client(params) as client:
        async def call(a: int, b: int) -> None:
            result = await client.call_tool(name, {"a": a, "b": b})
            assert not result.is_error, result
        return await _timed(call, calls, rng)


LOCAL_ADD = '''from toolkeeper import tool


@tool(risk="safe")
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''


def _serve(tmp: Path, upstream: str) -> tuple[subprocess.Popen[str], str]:
    """``toolkeeper serve`` (the CLI, as shipped: SQLite audit in its state dir) whose config
    lists the upstream — ``upstream`` is its URL, ``stdio`` for the stdio process, or
    ``local`` for none: serve's own ``add`` instead (what serve costs without a relay)."""
    config, target = tmp / "toolkeeper.toml", []
    if upstream == "local":
        (tmp / "add.py").write_text(LOCAL_ADD)
        config.write_text("")
        target = [str(tmp / "add.py")]
    else:
        where = (f"url = {json.dumps(upstream)}\n" if upstream != "stdio" else
                 f"command = {json.dumps(sys.executable)}\n"
                 f"args = {json.dumps([str(HERE), '--upstream'])}\nsandbox = false\n")
        config.write_text("[mcp]\nenabled = true\n[[mcp.servers]]\nname = \"up\"\n"
                          f"risk = \"safe\"\nconnect_timeout_s = 60\n{where}")
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkeeper.cli", "serve", *target, "--no-builtins", "--port",
         "0", "--config", str(config), "--state-dir", str(tmp / "state"), "--auth", "none",
         "--rate-limit", "0"], stdout=subprocess.PIPE, text=True, cwd=tmp)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("toolkeeper serving on "):
        proc.kill()
        raise RuntimeError(f"serve did not start: {line!r}")
    return proc, line.split()[3]


async def over_serve(kind: str, calls: int, rng: random.Random, upstream: str) -> list[float]:
    """One kept-alive official client over Streamable HTTP: to the upstream itself
    (``direct``; over stdio when ``upstream`` is ``stdio``), to ``toolkeeper serve`` relaying
    to it (``serve``), or to serve's own ``add`` (``local``). The client negotiates as it does
    by default (the 2026-07-28 revision, which serve hands to the SDK's own entry); a kind
    ending in ``-2025`` pins it to the 2025-11-25 handshake, which serve answers in one pass
    (``direct-2025``: the upstream on that handshake, what those rows are compared with)."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    base_kind, mode = kind.removesuffix("-2025"), "legacy" if kind.endswith("-2025") else "auto"
    with tempfile.TemporaryDirectory() as scratch:
        tmp, procs, roles = Path(scratch), [], {}
        try:
            url = "stdio"
            if upstream == "http" and base_kind != "local":
                proc, url = start_http_upstream(tmp)
                procs.append(proc)
                roles["upstream"] = proc.pid
            if base_kind != "direct":
                served, base = _serve(tmp, url if base_kind == "serve" else "local")
                procs.append(served)
                roles["serve"] = served.pid
                url = f"{base}/mcp"
            name = "up-add" if base_kind == "serve" else "add"
            target = _upstream_params() if url == "stdio" else streamable_http_client(
                url, http_client=httpx2.AsyncClient(timeout=60))
            async with Client(target, mode=mode) as client:
                await _listed(client, name)

                async def call(a: int, b: int) -> None:
                    result = await client.call_tool(name, {"a": a, "b": b})
                    assert not result.is_error, result
                return await _timed(call, calls, rng, _Cpu(roles))
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=30)


CPU_USED: dict[str, float] = {}
"""The CPU time a call (µs) each process spent in the last ``over_serve`` measurement: the
client's (this process, every thread) and, where ``/proc`` has them (to its clock tick:
use a few hundred calls), serve's and the upstream's."""


def _cpu_s(pid: int) -> float | None:
    """A process's user and system CPU seconds so far, from ``/proc`` (None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Cpu:
    """Notes in ``CPU_USED`` what each process (``roles``: name to pid) and this one spend
    between ``start`` and ``stop``."""

    def __init__(self, roles: dict[str, int]) -> None:
        self.roles = roles
        self.began: dict[str, float | None] = {}
        self.client = 0.0

    def start(self) -> None:
        self.began = {role: _cpu_s(pid) for role, pid in self.roles.items()}
        self.client = time.process_time()

    def stop(self, calls: int) -> None:
        CPU_USED["client"] = (time.process_time() - self.client) / calls * 1e6
        for role, pid in self.roles.items():
            now, then = _cpu_s(pid), self.began[role]
            if now is not None and then is not None:
                CPU_USED[role] = (now - then) / calls * 1e6


async def _listed(client: Any, name: str) -> None:
    """Wait until ``name`` is listed (serve lists its upstreams while it starts serving)."""
    with anyio.fail_after(60):
        while name not in {t.name for t in (await client.list_tools()).tools}:
            await anyio.sleep(0.05)


async def serve_http(kind: str, calls: int, rng: random.Random) -> list[float]:
    return await over_serve(kind, calls, rng, "http")


async def serve_stdio(kind: str, calls: int, rng: random.Random) -> list[float]:
    return await over_serve(kind, calls, rng, "stdio")


RUNS = {"in process": in_process, "end to end": end_to_end,
        "serve, HTTP upstream": serve_http, "serve, stdio upstream": serve_stdio}
KINDS = {"in process": ("direct", "unaudited", "gateway"),
         "end to end": ("direct", "relay", "gateway"),
         "serve, HTTP upstream": ("direct", "direct-2025", "serve", "serve-2025", "local",
                                  "local-2025"),
         "serve, stdio upstream": ("direct", "serve")}
GROUPS = {"in-process": "in process", "end-to-end": "end to end",
          "serve-http": "serve, HTTP upstream", "serve-stdio": "serve, stdio upstream"}
LABELS = {"direct": "direct", "direct-2025": "direct, the client on the 2025-11-25 handshake",
          "relay": "bare SDK relay (no door): the floor",
          "gateway": "toolkeeper gateway", "unaudited": "toolkeeper gateway, no audit log",
          "serve": "toolkeeper serve (HTTP) → upstream",
          "serve-2025": "the same, the client on the 2025-11-25 handshake",
          "local": "toolkeeper serve (HTTP), its own add: no upstream",
          "local-2025": "the same, the client on the 2025-11-25 handshake"}
BEFORE = {"in process": ("gateway",), "end to end": ("gateway",),
          "serve, HTTP upstream": ("serve", "serve-2025", "local"),
          "serve, stdio upstream": ("serve",)}
"""The kinds ``--before`` measures a second time, with the other checkout's code."""


def _one(where: str, kind: str, src: str | None, calls: int, seed: int
         ) -> tuple[list[float], dict[str, float]]:
    """One measurement in a fresh process (with the code of ``src`` when given): its times
    and the CPU each process spent a call (``CPU_USED``; empty where not measured)."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src
    out = subprocess.run([sys.executable, str(HERE), "--calls", str(calls), "--one", where, kind,
                          str(seed)], capture_output=True, text=True, check=False, env=env)
    if out.returncode != 0:
        print(f"{where} {kind} failed: {out.stderr.strip()[-500:]}", file=sys.stderr)
        return [], {}
    found = json.loads(out.stdout.strip().splitlines()[-1])
    return found["times"], found["cpu"]


def _row(where: str, label: str, values: list[float], direct: float) -> str:
    ordered = sorted(values)
    p50 = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    added = f"{(p50 - direct) * 1e6:,.0f} µs" if not label.startswith("direct") else ""
    return (f"| {where} | {label} | {p50 * 1e6:,.0f} | {p99 * 1e6:,.0f} | {p50 / direct:.2f}x "
            f"| {added} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", metavar="SRC", help="also run the gateway with the code of "
                        "this src folder (an older checkout), side by side")
    parser.add_argument("--only", nargs="+", choices=sorted(GROUPS), help="measure only these "
                        "groups (default: all)")
    parser.add_argument("--upstream", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--gateway", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--relay", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    for flag, serve in ((args.upstream, upstream), (args.gateway, gateway_server),
                        (args.relay, relay_server)):
        if flag:
            serve()
            return
    if args.one:
        where, kind, seed = args.one
        times = anyio.run(RUNS[where], kind, args.calls, random.Random(int(seed)))
        print(json.dumps({"times": times, "cpu": CPU_USED}))
        return
    groups = {where: KINDS[where] for where in (
        [GROUPS[g] for g in args.only] if args.only else KINDS)}
    keys = [(where, kind, None) for where, kinds in groups.items() for kind in kinds]
    if args.before:
        keys += [(where, kind, args.before) for where in groups for kind in BEFORE[where]]
    samples: dict[tuple[str, str, str | None], list[float]] = {key: [] for key in keys}
    used: dict[tuple[str, str, str | None], list[dict[str, float]]] = {key: [] for key in keys}
    for round_ in range(args.rounds):
        order = list(keys)
        random.Random(round_).shuffle(order)
        for key in order:
            times, cpu = _one(*key, args.calls, round_ * 7)
            samples[key] += times
            used[key] += [cpu] if cpu else []
    print(f"{time.strftime('%Y-%m-%d')}, Python {sys.version.split()[0]}, {args.calls} "
          f"sequential calls x {args.rounds} interleaved rounds (each in a fresh process), load "
          f"average {os.getloadavg()[0]:.1f}\n")
    print("| path | to the upstream | p50 µs | p99 µs | ÷ direct (p50) | adds (p50) |")
    print("|---|---|---:|---:|---:|---:|")
    for where, kinds in groups.items():
        for kind in kinds:
            print(_row(where, LABELS[kind], samples[(where, kind, None)],
                       _direct(samples, where, kind)))
        for kind in BEFORE[where] if args.before else ():
            print(_row(where, f"{LABELS[kind]} (before)", samples[(where, kind, args.before)],
                       _direct(samples, where, kind)))
    _cpu_table(used, args.before)


def _cpu_table(used: dict[tuple[str, str, str | None], list[dict[str, float]]],
               before: str | None) -> None:
    """CPU µs a call of each process, the median of the rounds (the serve groups only)."""
    rows = [(key, runs) for key, runs in used.items() if runs]
    if not rows:
        return
    print("\n| path | to the upstream | client CPU µs | serve CPU µs | upstream CPU µs |")
    print("|---|---|---:|---:|---:|")
    for (where, kind, src), runs in rows:
        label = LABELS[kind] + (" (before)" if src is not None and src == before else "")
        cells = [f"{statistics.median(r[role] for r in runs):,.0f}"
                 if all(role in r for r in runs) else ""
                 for role in ("client", "serve", "upstream")]
        print(f"| {where} | {label} | {' | '.join(cells)} |")


def _direct(samples: dict[tuple[str, str, str | None], list[float]], where: str,
            kind: str) -> float:
    """The p50 a kind's "adds" is taken against: the direct call in the same wire era (a
    client on the 2025-11-25 handshake against the upstream on that handshake too)."""
    era = "direct-2025" if kind.endswith("-2025") and (where, "direct-2025", None) in samples \
        else "direct"
    return statistics.median(samples[(where, era, None)])


if __name__ == "__main__":
    main()
