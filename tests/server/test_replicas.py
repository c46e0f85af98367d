"""Three ``toolkeeper serve`` replicas on one real PostgreSQL database, no session affinity:
a call waiting on one replica is approved through another and runs once; a replica killed while
running an approved call is never followed by a second run; 1,000 concurrent calls spread over
the replicas leave exactly 1,000 audit rows."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from ..blocks import text_of
from .test_serve import CLIENT_TOKENS, TOKEN, _client, _start

TOOLS = '''
import time
from pathlib import Path
from toolkeeper import ToolRisk, tool

MARKS = Path(__file__).with_name("marks")


@tool
def ping(n: int) -> int:
    """Answer n."""
    return n


@tool(risk=ToolRisk.CRITICAL)
def launch(n: int, seconds: float = 0.0) -> str:
    """Launch run n (it takes some seconds)."""
    with MARKS.open("a") as marks:
        marks.write(f"start {n}\\n")
    time.sleep(seconds)
    with MARKS.open("a") as marks:
        marks.write(f"done {n}\\n")
    return f"launched {n}"
'''


@pytest.fixture
def replicas(tmp_path: Path, postgres_url: str) -> Iterator[list[tuple[subprocess.Popen[str], str]]]:
    (tmp_path / "tools.py").write_text(TOOLS)
    started = [_start(tmp_path, "--store", postgres_url, "--rate-limit", "10000",
                      "--approval-wait", "30", tools=str(tmp_path / "tools.py"), state=f"r{i}")
               for i in range(3)]
    for _, url in started:  # the first made the store's default client: one agent, 3 replicas
        CLIENT_TOKENS[url] = CLIENT_TOKENS[started[0][1]]
    yield started
    for proc, _ in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)


def _marks(tmp_path: Path) -> list[str]:
    path = tmp_path / "marks"
    return path.read_text().splitlines() if path.exists() else []


def _api(url: str, path: str, body: dict[str, object] | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    if body is None:
        return httpx.get(f"{url}{path}", headers=headers, timeout=30)
    return httpx.post(f"{url}{path}", headers=headers, json=body, timeout=30)


async def test_a_call_waiting_on_one_replica_is_approved_on_another_and_runs_once(
        replicas: list[tuple[subprocess.Popen[str], str]], tmp_path: Path) -> None:
    (_, a), (_, b), (_, c) = replicas
    results = []

    async def call() -> None:
        async with _client(a) as client:
            results.append(await client.call_tool("launch", {"n": 1}))

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        with anyio.fail_after(20):
            while not (listed := _api(c, "/api/approvals?state=pending").json()["approvals"]):
                await anyio.sleep(0.05)
        (request,) = listed
        decided = _api(b, f"/api/approvals/{request['id']}/decision", {"decision": "approve"})
        assert decided.status_code == 200, decided.text
    (result,) = results
    assert not result.is_error and text_of(result.content[0]) == "launched 1"
    assert _marks(tmp_path) == ["start 1", "done 1"]
    final = _api(c, f"/api/approvals/{request['id']}").json()
    assert final["state"] == "done"


async def test_a_replica_killed_while_running_an_approved_call_is_never_followed_by_a_rerun(
        replicas: list[tuple[subprocess.Popen[str], str]], tmp_path: Path) -> None:
    (proc_a, a), (_, b), _ = replicas
    arguments = {"n": 2, "seconds": 30}

    async def call() -> None:
        async with _client(a) as client:
            await client.call_tool("launch", arguments)

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        with anyio.fail_after(20):
            while not (listed := _api(b, "/api/approvals?state=pending").json()["approvals"]):
                await anyio.sleep(0.05)
        _api(b, f"/api/approvals/{listed[0]['id']}/decision", {"decision": "approve"})
        with anyio.fail_after(20):
            while "start 2" not in _marks(tmp_path):
                await anyio.sleep(0.05)
        proc_a.send_signal(signal.SIGKILL)  # dies holding the claimed request
        proc_a.wait(timeout=20)
        group.cancel_scope.cancel()
    async with _client(b) as client:
        again = await client.call_tool("launch", arguments)
    assert again.is_error and "does not run twice" in text_of(again.content[0])
    assert _api(b, f"/api/approvals/{listed[0]['id']}").json()["state"] == "executing"
    assert _marks(tmp_path) == ["start 2"]  # one start, on the replica that died


async def test_a_thousand_concurrent_calls_over_three_replicas_leave_a_thousand_audit_rows(
        replicas: list[tuple[subprocess.Popen[str], str]], postgres_url: str) -> None:
    import psycopg

    urls = [url for _, url in replicas]
    clients, per_client = 20, 50
    answered: list[int] = []

    async def one_client(k: int) -> None:
        async with _client(random.Random(k).choice(urls)) as client:
            for i in range(per_client):
                n = k * per_client + i
                result = await client.call_tool("ping", {"n": n})
                assert not result.is_error, result
                answered.append(int(text_of(result.content[0])))

    started = time.monotonic()
    async with anyio.create_task_group() as group:
        for k in range(clients):
            group.start_soon(one_client, k)
    assert sorted(answered) == list(range(clients * per_client))
    assert time.monotonic() - started < 240
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute("SELECT count(*), count(DISTINCT args_digest) FROM audit "
                            "WHERE tool = 'ping' AND status = 'ok'").fetchone()
    assert rows == (1000, 1000)


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "toolkeeper.cli", *args], capture_output=True,
                          text=True, timeout=60, check=False, cwd=tmp_path,
                          env={**os.environ, "COLUMNS": "300"})


async def test_the_cli_reads_and_decides_on_the_shared_store_and_a_stranger_token_is_refused(
        tmp_path: Path, postgres_url: str) -> None:
    (tmp_path / "tools.py").write_text(TOOLS)
    proc, url = _start(tmp_path, "--store", postgres_url, "--approval-wait", "0",
                       tools=str(tmp_path / "tools.py"), state="a")
    try:
        async with _client(url) as client:
            pending = await client.call_tool("launch", {"n": 7})
            assert pending.is_error and "waiting for approval" in pending.content[0].text  # type: ignore[union-attr]
            listed = _cli(tmp_path, "approvals", "list", "--json", "--store", postgres_url)
            assert listed.returncode == 0, listed.stderr
            (request,) = [r for r in json.loads(listed.stdout)["approvals"]
                          if r["tool"] == "launch"]
            decided = _cli(tmp_path, "approvals", "approve", request["id"], "--store",
                           postgres_url)
            assert decided.returncode == 0, decided.stderr
            ran = await client.call_tool("launch", {"n": 7})
        assert not ran.is_error and "launched 7" in ran.content[0].text  # type: ignore[union-attr]
        audit = _cli(tmp_path, "audit", "--json", "--store", postgres_url)
        rows = [json.loads(line) for line in audit.stdout.splitlines() if line.strip()]
        assert [(r["tool"], r["status"]) for r in rows] == [("launch", "ok"),
                                                           ("launch", "pending")]
        stranger = subprocess.run(
            [sys.executable, "-m", "toolkeeper.cli", "serve", str(tmp_path / "tools.py"),
             "--no-builtins", "--port", "0", "--store", postgres_url, "--state-dir",
             str(tmp_path / "b")], capture_output=True, text=True, timeout=60, cwd=tmp_path,
            env={**os.environ, "TOOLKEEPER_TOKEN": "another-operator-token-9876543210"})
        assert stranger.returncode != 0 and "Traceback" not in stranger.stderr
        assert "another operator token" in stranger.stderr
        assert len(stranger.stderr.strip().splitlines()) == 1  # one line for the operator
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
