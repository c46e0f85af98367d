"""How the runs of MCP tasks end, against the real ``toolkeeper serve`` with the official MCP
Python client declaring the tasks extension (``test_tasks``): a call of such a client that
never became a task stops when the client cancels its request, as any call does."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from ..server.test_serve import CLIENT_TOKENS, _start
from .test_tasks import Tasks, _client, _stop

TOOLS = '''
import asyncio
from pathlib import Path
from toolkeeper import tool

MARKS = Path(__file__).with_name("marks")


@tool
async def crawl(pages: int, seconds: float = 10.0) -> str:
    """Crawl some pages, slowly (declared without task support: a plain call)."""
    with MARKS.open("a") as marks:
        marks.write(f"start {pages}\\n")
    await asyncio.sleep(seconds)
    with MARKS.open("a") as marks:
        marks.write(f"done {pages}\\n")
    return f"crawled {pages} pages"
'''


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "tools.py").write_text(TOOLS)
    proc, url = _start(tmp_path, tools=str(tmp_path / "tools.py"))
    yield url
    _stop(proc)


def _marks(tmp_path: Path) -> list[str]:
    path = tmp_path / "marks"
    return path.read_text().splitlines() if path.exists() else []


def _audited(tmp_path: Path, tool: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
        return db.execute("SELECT status, error_code FROM audit WHERE tool = ?",
                          (tool,)).fetchall()


async def _until(condition: Any, what: str, within_s: float = 30.0) -> Any:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        seen = condition()
        if seen:
            return seen
        await anyio.sleep(0.05)
    raise AssertionError(f"not within {within_s:g} s: {what}")


async def test_a_tasks_clients_plain_call_stops_when_the_client_cancels_its_request(
        served: str, tmp_path: Path) -> None:
    async with _client(served, CLIENT_TOKENS[served], [Tasks()]) as client:
        async with anyio.create_task_group() as group:
            group.start_soon(client.call_tool, "crawl", {"pages": 3})
            await _until(lambda: "start 3" in _marks(tmp_path), "the call started")
            group.cancel_scope.cancel()  # the caller gives up: the SDK cancels its request
        rows = await _until(lambda: _audited(tmp_path, "crawl"), "the call's audit row")
    assert rows == [("error", "cancelled")]  # stopped, not run to its end
    assert _marks(tmp_path) == ["start 3"]
