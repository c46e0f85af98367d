"""Benchmark: where a relayed call's time goes, in one process.

The upstream is the gateway benchmarks' HTTP upstream (``upstreams.py``: the official SDK's
bare low-level server, stateless, JSON answers, on loopback, in its own process). One process calls its ``add`` in
several ways, in chunks of ``--chunk`` calls taking turns for ``--rounds`` rounds, and reports
the median of the chunks' p50s (a chunk of each kind in every round, so a busy moment of the
machine falls on every kind alike):

- ``socket``: the request written on a kept-alive socket and the answer read, by hand — the
  upstream's own time and loopback, the floor of any client;
- ``kept-alive``: the lean path's own connections alone (``http11.KeptAlive``: h11 over a
  kept-alive socket), a request built beforehand, its answer read to the end;
- ``httpx``: ``httpx2.AsyncClient.post`` (its own connection pool);
- ``sdk client``: the official client's ``call_tool`` on the 2025-11-25 handshake, as the
  gateway called before its lean path;
- ``lean``: the gateway's upstream connection (``Upstream.call``: the lean path's post, the
  answer read and checked by the SDK's validators);
- ``lean, client's layers``: the same with the transport withheld from the lean path, so the
  call goes through the httpx client's own layers (auth, redirects, cookies) as a call with
  OAuth or cookies does;
- ``door``: the gateway's tool through ``ToolInvoker.invoke`` (no audit log);
- ``door + audit``: the same with the SQLite audit log as ``toolkeeper serve`` keeps it.

Besides each kind's p50, the CPU time this process spent a call (all its threads, over each
chunk, median of the chunks): on a machine whose cores are all busy, a call's latency is
mostly the CPU time of the processes it passes through.

    python benchmarks/bench_relay.py [--chunk 100] [--rounds 8]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from upstreams import start_http_upstream

KINDS = ("socket", "kept-alive", "httpx", "sdk client", "lean", "lean, client's layers", "door",
         "door + audit")
Call = Callable[[int, int], Awaitable[None]]
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json",
           "mcp-protocol-version": "2025-11-25"}


def _body(a: int, b: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "add", "arguments": {"a": a, "b": b}}}).encode()


async def _socket(url: str) -> tuple[Call, Any]:
    """A kept-alive socket: the request as bytes, the answer read to its Content-Length."""
    host, port = url.split("//")[1].split("/")[0].split(":")
    stream = await anyio.connect_tcp(host, int(port))
    head = "".join(f"{k}: {v}\r\n" for k, v in HEADERS.items())

    async def call(a: int, b: int) -> None:
        body = _body(a, b)
        await stream.send(f"POST /mcp HTTP/1.1\r\nhost: {host}:{port}\r\n{head}"
                          f"content-length: {len(body)}\r\n\r\n".encode() + body)
        data = b""
        while b"\r\n\r\n" not in data:
            data += await stream.receive()
        top, _, rest = data.partition(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in top.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        while len(rest) < length:
            rest += await stream.receive()
        assert b'"isError":false' in rest, rest
    return call, stream


def _kept_alive(url: str) -> Call:
    """The lean path's transport alone: ``KeptAlive.handle_async_request``, the body read."""
    import httpx2

    from toolkeeper.gateway.http11 import KeptAlive

    kept, target = KeptAlive(httpx2.AsyncHTTPTransport()), httpx2.URL(url)

    async def call(a: int, b: int) -> None:
        request = httpx2.Request("POST", target, content=_body(a, b), headers=HEADERS,
                                 extensions={"timeout": {"connect": 60, "read": 60}})
        answer = await kept.handle_async_request(request)
        body = b"".join([chunk async for chunk in answer.stream])
        await answer.stream.aclose()
        assert b'"isError":false' in body, body
    return call


def _checked(result: Any) -> None:
    assert not getattr(result, "is_error", False) and getattr(result, "ok", True), result


async def measure(url: str, chunk: int, rounds: int
                  ) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from toolkeeper import ToolInvoker
    from toolkeeper.config import MCPServerConfig
    from toolkeeper.core.call import ToolCall
    from toolkeeper.gateway.gateway import MCPGateway
    from toolkeeper.invoke import ChainPolicy
    from toolkeeper.invoke.audit import SqliteAuditLog
    from toolkeeper.toolbox import Toolbox

    config = MCPServerConfig(name="up", url=url, risk="safe", connect_timeout_s=60)
    toolbox, rng = Toolbox(), random.Random(0)
    chunks: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as state:
        policy = ChainPolicy(max_tool_calls=10**9, total_timeout_s=10.0**9)
        plain = ToolInvoker(toolbox, policy=policy)
        audited = ToolInvoker(toolbox, policy=policy,
                              audit=SqliteAuditLog(Path(state) / "audit.db"))
        raw, stream = await _socket(url)
        async with MCPGateway([config]) as gateway, \
                httpx2.AsyncClient(timeout=60) as http, \
                Client(streamable_http_client(url, http_client=httpx2.AsyncClient(timeout=60)),
                       mode="legacy") as client, \
                plain.open_session() as s1, audited.open_session() as s2, stream:
            await gateway.attach(toolbox)
            upstream = gateway.upstream("up")

            async def over_httpx(a: int, b: int) -> None:
                answer = await http.post(url, content=_body(a, b), headers=HEADERS)
                assert answer.status_code == 200 and b'"isError":false' in answer.content

            async def sdk(a: int, b: int) -> None:
                _checked(await client.call_tool("add", {"a": a, "b": b}))

            async def lean(a: int, b: int) -> None:
                _checked(await upstream.call("add", {"a": a, "b": b}))

            async def lean_layered(a: int, b: int) -> None:
                link = upstream.lean  # the transport withheld: the client's layers
                assert link is not None
                kept, link.transport = link.transport, None
                try:
                    _checked(await upstream.call("add", {"a": a, "b": b}))
                finally:
                    link.transport = kept

            def door(invoker: ToolInvoker, session: Any) -> Call:
                async def call(a: int, b: int) -> None:
                    _checked(await invoker.invoke(ToolCall(
                        id="c", name="up-add", arguments={"a": a, "b": b}), session=session))
                return call

            kinds: dict[str, Call] = {"socket": raw, "kept-alive": _kept_alive(url),
                                      "httpx": over_httpx, "sdk client": sdk,
                                      "lean": lean, "lean, client's layers": lean_layered,
                                      "door": door(plain, s1),
                                      "door + audit": door(audited, s2)}
            for call in kinds.values():  # warm up
                for _ in range(20):
                    await call(1, 2)
            for round_ in range(rounds):
                order = list(kinds)
                random.Random(round_).shuffle(order)
                for kind in order:
                    times, began_cpu = [], time.process_time()
                    for _ in range(chunk):
                        a, b = rng.randrange(10**6), rng.randrange(10)
                        began = time.perf_counter()
                        await kinds[kind](a, b)
                        times.append(time.perf_counter() - began)
                    chunks.setdefault(kind, []).append(statistics.median(times) * 1e6)
                    cpu.setdefault(kind, []).append(
                        (time.process_time() - began_cpu) / chunk * 1e6)
    return chunks, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunk", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        proc, url = start_http_upstream(Path(scratch))
        try:
            chunks, cpu = anyio.run(measure, url, args.chunk, args.rounds,
                                    backend_options={"use_uvloop": _uvloop()})
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(f"{time.strftime('%Y-%m-%d')}, Python {sys.version.split()[0]}, {os.cpu_count()} "
          f"cores, {args.rounds} rounds of {args.chunk}-call chunks taking turns, load average "
          f"{os.getloadavg()[0]:.2f} at the end\n")
    print("| a call of the upstream's `add` | p50 µs (median of the chunks) | chunks' range "
          "| CPU µs a call | chunks' range |")
    print("|---|---:|---:|---:|---:|")
    for kind in KINDS:
        values, used = chunks[kind], cpu[kind]
        print(f"| {kind} | {statistics.median(values):,.0f} | "
              f"{min(values):,.0f}–{max(values):,.0f} | {statistics.median(used):,.0f} | "
              f"{min(used):,.0f}–{max(used):,.0f} |")


def _uvloop() -> bool:
    """Whether uvloop is installed (the ``fast`` extra): ``toolkeeper serve`` runs on it then,
    and so does this benchmark."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    main()
