"""Three ``toolkeeper serve`` replicas (stateless, the default) on one real PostgreSQL database
behind a real load balancer (HAProxy, round-robin, no stickiness), reached by the official MCP
client: each request of a client lands on another replica, and a replica killed with -9 while
calls wait for a person loses nothing — every answered call is recorded once, every waiting
call, retried through the balancer as the docs tell clients to, is answered once after the
decision."""

from __future__ import annotations

import itertools
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import httpx2
import psycopg
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from ..balancer import REPLICA_HEADER, Balancer, balancer
from ..blocks import text_of
from .test_replicas import TOOLS, _marks
from .test_serve import CLIENT_TOKENS, TOKEN, _start

Replicas = list[tuple[subprocess.Popen[str], str]]


@pytest.fixture
def balanced(tmp_path: Path, postgres_url: str) -> Iterator[tuple[Balancer, Replicas]]:
    (tmp_path / "tools.py").write_text(TOOLS)
    started = [_start(tmp_path, "--store", postgres_url, "--rate-limit", "10000",
                      "--approval-wait", "50", tools=str(tmp_path / "tools.py"), state=f"r{i}")
               for i in range(3)]
    try:
        with balancer([url for _, url in started], tmp_path) as front:
            CLIENT_TOKENS[front.url] = CLIENT_TOKENS[started[0][1]]  # one agent, 3 replicas
            yield front, started
    finally:
        for proc, _ in started:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                proc.wait(timeout=30)


def _client(url: str, seen: list[str] | None = None) -> Client:
    """The official client through the balancer; ``seen`` gets the replica of each answer."""
    async def note(response: httpx2.Response) -> None:
        if seen is not None:
            seen.append(response.headers.get(REPLICA_HEADER, "?"))

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {CLIENT_TOKENS[url]}"},
                              timeout=90, event_hooks={"response": [note]})
    return Client(streamable_http_client(f"{url}/mcp", http_client=http))


async def test_each_request_of_a_client_lands_on_another_replica(
        balanced: tuple[Balancer, Replicas]) -> None:
    front, _ = balanced
    seen: list[str] = []
    async with _client(front.url, seen) as client:
        for n in range(9):
            result = await client.call_tool("ping", {"n": n})
            assert not result.is_error and text_of(result.content[0]) == str(n)
    assert set(seen) == {"r0", "r1", "r2"}, seen
    assert all(a != b for a, b in itertools.pairwise(seen)), seen


def _pending(url: str) -> list[dict[str, object]]:
    found = httpx.get(f"{url}/api/approvals?state=pending", timeout=30,
                      headers={"Authorization": f"Bearer {TOKEN}"}).json()["approvals"]
    return list(found)


async def _wait_pending(url: str, count: int) -> list[dict[str, object]]:
    with anyio.fail_after(60):
        while len(found := _pending(url)) < count:
            await anyio.sleep(0.05)
    return found


async def test_a_replica_killed_while_calls_wait_loses_no_call_and_runs_none_twice(
        balanced: tuple[Balancer, Replicas], tmp_path: Path, postgres_url: str) -> None:
    front, replicas = balanced
    calls, answers, failures = 6, {}, {}

    async def call(n: int) -> None:
        # A client whose request failed on the way (the replica died) calls again through
        # the balancer: the same call rejoins its request, and runs once it is approved.
        async with _client(front.url) as client:
            assert not (await client.call_tool("ping", {"n": n})).is_error  # answered before
        for _attempt in range(3):
            try:
                async with _client(front.url) as client:
                    result = await client.call_tool("launch", {"n": n})
            except Exception as exc:  # the connection to the killed replica broke
                failures[n] = repr(exc)
                continue
            answers[n] = text_of(result.content[0])
            return

    async with anyio.create_task_group() as group:
        for n in range(calls):
            group.start_soon(call, n)
        await _wait_pending(front.url, calls)
        with anyio.fail_after(30):  # every call waits on a replica now: kill one holding some
            while not (holding := [name for name, count in front.open_requests().items()
                                   if count > 0]):
                await anyio.sleep(0.05)
        victim = replicas[front.names.index(holding[0])][0]
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
        with anyio.fail_after(60):  # the killed replica's calls fail and are made again
            while len(failures) < 1:
                await anyio.sleep(0.05)
        for request in _pending(front.url):  # a person approves every request, once
            decided = httpx.post(f"{front.url}/api/approvals/{request['id']}/decision",
                                 json={"decision": "approve"}, timeout=30,
                                 headers={"Authorization": f"Bearer {TOKEN}"})
            assert decided.status_code == 200, decided.text
    assert answers == {n: f"launched {n}" for n in range(calls)}, (answers, failures)
    marks = _marks(tmp_path)
    assert sorted(marks) == sorted([f"start {n}" for n in range(calls)]
                                   + [f"done {n}" for n in range(calls)]), marks
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute("SELECT tool, status, count(*) FROM audit WHERE status = 'ok' "
                            "GROUP BY tool, args_digest, status").fetchall()
    assert sorted(rows) == [("launch", "ok", 1)] * calls + [("ping", "ok", 1)] * calls
