"""What ``toolkeeper serve`` has recorded survives its end: every answered call has its audit
row in the SQLite file after ``kill -9``, and calls in flight at SIGTERM finish (within the
stop's drain) and are recorded before the process exits."""

from __future__ import annotations

import signal
import sqlite3
import time
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from .test_serve import CLIENT_TOKENS, _start

pytestmark = pytest.mark.anyio

TOOLS = '''
from pathlib import Path

import anyio

from toolkeeper import tool


@tool
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@tool
async def linger(seconds: float, mark: str = "") -> str:
    """Say it started (a file), wait, then answer."""
    if mark:
        Path(mark).write_text("started")
    await anyio.sleep(seconds)
    return "lingered"
'''


def _client(url: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {CLIENT_TOKENS[url]}"},
                              timeout=60)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http))


def _rows(tmp_path: Path, tool: str) -> list[tuple[str, str]]:
    with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
        return db.execute("SELECT call_id, status FROM audit WHERE tool = ?",
                          (tool,)).fetchall()


@pytest.mark.parametrize("concurrent", [1, 8])
async def test_every_answered_call_is_in_the_file_after_kill_9(
        tmp_path: Path, concurrent: int) -> None:
    (tmp_path / "adding.py").write_text(TOOLS)
    proc, url = _start(tmp_path, "--rate-limit", "0", tools=str(tmp_path / "adding.py"))
    answered: list[int] = []
    try:
        async with _client(url) as client:

            async def calls(start: int) -> None:
                for n in range(start, start + 30):
                    result = await client.call_tool("add", {"a": n, "b": 1})
                    assert result.structured_content == {"result": n + 1}
                    answered.append(n)

            async with anyio.create_task_group() as group:
                for worker in range(concurrent):
                    group.start_soon(calls, worker * 1000)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=20)
    assert len(answered) == 30 * concurrent
    rows = _rows(tmp_path, "add")
    assert len(rows) == len(answered) and {s for _, s in rows} == {"ok"}


async def test_calls_in_flight_at_sigterm_finish_and_are_recorded(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(TOOLS)
    proc, url = _start(tmp_path, tools=str(tmp_path / "slow.py"))
    answers: list[str] = []
    headers = {"Authorization": f"Bearer {CLIENT_TOKENS[url]}",
               "Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:

        async def one(n: int) -> None:
            response = await http.post(f"{url}/mcp", json={
                "jsonrpc": "2.0", "id": n, "method": "tools/call",
                "params": {"name": "linger", "arguments": {
                    "seconds": 0.3, "mark": str(tmp_path / f"started-{n}")}}})
            answers.append(response.json()["result"]["content"][0]["text"])

        async with anyio.create_task_group() as group:
            for n in range(6):
                group.start_soon(one, n)
            deadline = time.monotonic() + 30
            while len(list(tmp_path.glob("started-*"))) < 6:  # all six are running
                assert time.monotonic() < deadline, list(tmp_path.glob("started-*"))
                await anyio.sleep(0.01)
            proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == -signal.SIGTERM  # stopped by it, after cleaning up:
    assert not (tmp_path / "state" / "server.json").exists()  # the server file is gone
    assert answers == ["lingered"] * 6
    rows = _rows(tmp_path, "linger")
    assert len(rows) == 6 and {s for _, s in rows} == {"ok"}
