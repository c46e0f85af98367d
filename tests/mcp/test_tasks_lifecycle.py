"""How the runs of MCP tasks end, against the real ``toolkeeper serve`` with the official MCP
Python client declaring the tasks extension (``test_tasks``): a call of such a client that
never became a task stops when the client cancels its request, as any call does; a server that
stops fails its tasks, those waiting for a person too, saying to call the tool again; and the
tasks of a server killed outright fail the same way when another server on the store reads
them, once it has been silent for ten seconds."""

from __future__ import annotations

import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from ..server.test_serve import CLIENT_TOKENS, TOKEN, _start
from .test_tasks import Created, Tasks, _client, _stop, poll

TOOLS = '''
import asyncio
from pathlib import Path
from toolkeeper import ToolRisk, tool

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


@tool(task_support="optional")
async def survey(pages: int) -> str:
    """Survey some pages, for a minute (a task for a client that supports them)."""
    with MARKS.open("a") as marks:
        marks.write(f"survey {pages}\\n")
    await asyncio.sleep(60)
    return f"surveyed {pages} pages"


@tool(risk=ToolRisk.CRITICAL)
def launch(n: int) -> str:
    """Launch run n (a person must approve it)."""
    return f"launched {n}"
'''
STOPPED = "the server stopped before the task ended: call the tool again"


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


def _pending(url: str) -> list[Any]:
    answer = httpx.get(f"{url}/api/approvals?state=pending",
                       headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["approvals"])


async def _tasks(url: str, tmp_path: Path) -> dict[str, str]:
    """Two tasks of one client, by tool: ``launch`` waiting for a person, ``survey`` running."""
    async with _client(url, CLIENT_TOKENS[url], [Tasks()]) as client:
        waiting = await client.session.call_tool("launch", {"n": 1}, allow_claimed=True)
        running = await client.session.call_tool("survey", {"pages": 2}, allow_claimed=True)
    assert isinstance(waiting, Created) and isinstance(running, Created)
    await _until(lambda: _pending(url), "the launch's request stored")
    await _until(lambda: "survey 2" in _marks(tmp_path), "the survey started")
    return {"launch": waiting.task_id, "survey": running.task_id}


def _stored(tmp_path: Path, task_id: str) -> tuple[Any, ...]:
    with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
        return tuple(db.execute("SELECT status, message FROM mcp_tasks WHERE id = ?",
                                (task_id,)).fetchone())


async def test_a_stopping_server_fails_its_tasks_those_waiting_for_a_person_too(
        tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(TOOLS)
    proc, url = _start(tmp_path, "--approval-wait", "1", tools=str(tmp_path / "tools.py"))
    try:
        tasks = await _tasks(url, tmp_path)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert _stored(tmp_path, tasks["survey"]) == ("failed", STOPPED)
    assert _stored(tmp_path, tasks["launch"]) == ("failed", STOPPED)  # not 'working' for 1 h


async def test_the_tasks_of_a_killed_server_fail_when_another_reads_them(tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(TOOLS)
    proc, url = _start(tmp_path, "--approval-wait", "1", tools=str(tmp_path / "tools.py"))
    try:
        tasks = await _tasks(url, tmp_path)
    finally:
        proc.kill()  # kill -9: nothing of it ends its tasks
        proc.wait(timeout=30)
    again, url = _start(tmp_path, "--approval-wait", "1", tools=str(tmp_path / "tools.py"))
    try:
        async with _client(url, CLIENT_TOKENS[url], [Tasks()]) as client:
            ended = {tool: await poll(client.session, task_id, deadline_s=40)
                     for tool, task_id in tasks.items()}
        (request,) = _pending(url)  # the call made again takes its decision
    finally:
        _stop(again)
    for task in ended.values():
        assert task.status == "failed" and task.error is not None, task
        assert task.error["message"] == STOPPED
    assert request["tool"] == "launch"
