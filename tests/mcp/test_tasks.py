"""MCP tasks against the real ``toolkeeper serve``, with the official MCP Python client: a
client extension of its own (what a user of the SDK writes: a claim on the ``task`` result
that polls ``tasks/get``) and the raw requests the extension defines. The task's state is in
the store: replicas on one PostgreSQL database answer for each other's tasks, and a task is
its client's alone."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client, ClientSession
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict

from ..blocks import text_of
from ..server.test_serve import CLIENT_TOKENS, TOKEN, _start, _tokens

EXTENSION = "io.modelcontextprotocol/tasks"
TOOLS = '''
import asyncio
from pathlib import Path
from toolkeeper import tool

MARKS = Path(__file__).with_name("marks")


@tool(task_support="optional")
async def render(frames: int, seconds: float = 0.0) -> str:
    """Render some frames (a task for a client that supports them)."""
    with MARKS.open("a") as marks:
        marks.write(f"start {frames}\\n")
    await asyncio.sleep(seconds)
    with MARKS.open("a") as marks:
        marks.write(f"done {frames}\\n")
    return f"rendered {frames} frames"


@tool(task_support="required")
def export(name: str) -> str:
    """Export a file (only ever as a task)."""
    return f"exported {name}"
'''


class TaskParams(types.RequestParams):
    task_id: str


class GetTask(types.Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskParams
    name_param = "taskId"


class CancelTask(types.Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskParams
    name_param = "taskId"


class Detailed(types.Result):
    model_config = ConfigDict(extra="allow")
    task_id: str
    status: str
    status_message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class Created(types.Result):
    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


async def poll(session: ClientSession, task_id: str, until: frozenset[str] = frozenset(
        {"completed", "failed", "cancelled"}), deadline_s: float = 60) -> Detailed:
    """``tasks/get`` until the task's status is one of ``until`` (or the deadline passes:
    the last status seen is what the test reports)."""
    end = time.monotonic() + deadline_s
    seen: Detailed | None = None
    while time.monotonic() < end:
        seen = await session.send_request(
            GetTask(params=TaskParams(task_id=task_id)), Detailed)
        if seen.status in until:
            return seen
        await anyio.sleep(0.05)
    raise AssertionError(f"task {task_id} still {seen.status if seen else '?'} after "
                         f"{deadline_s} s")


class Tasks(ClientExtension):
    """The tasks extension as a client of the official SDK declares it: a task result is
    polled until it is over, and its result is the call's."""

    identifier = EXTENSION

    def __init__(self) -> None:
        self.created: list[Created] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=Created, resolve=self.resolve)]

    async def resolve(self, created: Created, ctx: ClaimContext) -> types.CallToolResult:
        self.created.append(created)
        done = await poll(ctx.session, created.task_id)
        assert done.status == "completed", done
        return types.CallToolResult.model_validate(done.result)


def _client(url: str, token: str, extensions: list[ClientExtension]) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http),
                  extensions=extensions)


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) in (0, 130)
    assert proc.stderr is not None and "Traceback" not in proc.stderr.read()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "tools.py").write_text(TOOLS)
    proc, url = _start(tmp_path, tools=str(tmp_path / "tools.py"))
    yield url
    _stop(proc)


async def test_a_call_becomes_a_task_whose_result_the_official_client_polls(
        served: str, tmp_path: Path) -> None:
    tasks = Tasks()
    async with _client(served, CLIENT_TOKENS[served], [tasks]) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        result = await client.call_tool("render", {"frames": 3})
    assert text_of(result.content[0]) == "rendered 3 frames" and not result.is_error
    (created,) = tasks.created
    assert created.status == "working" and created.ttl_ms == 3_600_000
    assert created.poll_interval_ms and created.poll_interval_ms > 0
    assert listed["render"].execution is None or listed["render"].execution.task_support in (
        None, "optional")
    with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
        rows = db.execute("SELECT id, status, tool, result FROM mcp_tasks").fetchall()
        audited = db.execute("SELECT tool, status FROM audit").fetchall()
    assert [(r[0], r[1], r[2]) for r in rows] == [(created.task_id, "completed", "render")]
    assert json.loads(rows[0][3])["content"][0]["text"] == "rendered 3 frames"
    assert audited == [("render", "ok")]  # one pass through the door


async def test_a_client_without_tasks_gets_a_plain_result_or_is_told_to_declare_them(
        served: str) -> None:
    async with _client(served, CLIENT_TOKENS[served], []) as client:
        plain = await client.call_tool("render", {"frames": 1})
        with pytest.raises(MCPError) as refused:
            await client.call_tool("export", {"name": "a.txt"})
        with pytest.raises(MCPError) as gated:
            await client.session.send_request(GetTask(params=TaskParams(task_id="x")), Detailed)
    assert text_of(plain.content[0]) == "rendered 1 frames"
    assert refused.value.error.code == -32021
    assert refused.value.error.data == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
    assert EXTENSION in refused.value.error.message and "export" in refused.value.error.message
    assert gated.value.error.code == -32021


async def test_a_task_is_its_clients_alone(served: str, tmp_path: Path) -> None:
    added = _tokens(tmp_path, "add", "mallory")
    assert added.returncode == 0, added.stderr
    async with _client(served, CLIENT_TOKENS[served], [Tasks()]) as owner, \
            _client(served, added.stdout.strip(), [Tasks()]) as other:
        created = await owner.session.call_tool("render", {"frames": 2, "seconds": 30},
                                                allow_claimed=True)
        task_id = created.task_id  # type: ignore[union-attr]
        for request in (GetTask(params=TaskParams(task_id=task_id)),
                        CancelTask(params=TaskParams(task_id=task_id))):
            with pytest.raises(MCPError) as hidden:
                await other.session.send_request(request, Detailed, request_read_timeout_seconds=30)
            assert hidden.value.error.code == -32602 and "not this client's" in \
                hidden.value.error.message
        still = await owner.session.send_request(GetTask(params=TaskParams(task_id=task_id)),
                                                 Detailed)
        await owner.session.send_request(CancelTask(params=TaskParams(task_id=task_id)),
                                         types.Result)
        cancelled = await poll(owner.session, task_id)
    assert still.status == "working" and cancelled.status == "cancelled"


@pytest.fixture
def replicas(tmp_path: Path, postgres_url: str) -> Iterator[list[str]]:
    (tmp_path / "tools.py").write_text(TOOLS)
    started = [_start(tmp_path, "--store", postgres_url, tools=str(tmp_path / "tools.py"),
                      state=f"r{i}") for i in range(2)]
    CLIENT_TOKENS[started[1][1]] = CLIENT_TOKENS[started[0][1]]  # one client, two replicas
    yield [url for _, url in started]
    for proc, _ in started:
        _stop(proc)


def _marks(tmp_path: Path) -> list[str]:
    path = tmp_path / "marks"
    return path.read_text().splitlines() if path.exists() else []


async def test_a_replica_answers_for_and_cancels_a_task_another_runs(
        replicas: list[str], tmp_path: Path) -> None:
    a, b = replicas
    token = CLIENT_TOKENS[a]
    tasks = Tasks()
    async with _client(a, token, [tasks]) as on_a, _client(b, token, [Tasks()]) as on_b:
        quick = await on_a.session.call_tool("render", {"frames": 1}, allow_claimed=True)
        slow = await on_a.session.call_tool("render", {"frames": 2, "seconds": 600},
                                            allow_claimed=True)
        done = await poll(on_b.session, quick.task_id)  # type: ignore[union-attr]
        end = time.monotonic() + 60
        while "start 2" not in _marks(tmp_path) and time.monotonic() < end:
            await anyio.sleep(0.05)
        assert "start 2" in _marks(tmp_path), _marks(tmp_path)
        await on_b.session.send_request(CancelTask(params=TaskParams(
            task_id=slow.task_id)), types.Result)  # type: ignore[union-attr]
        over = await poll(on_a.session, slow.task_id)  # type: ignore[union-attr]
        audit_end = time.monotonic() + 60
        audited: list[Any] = []
        while time.monotonic() < audit_end:
            audited = [row for row in _audit(a) if row["tool"] == "render"]
            if len(audited) == 2:
                break
            await anyio.sleep(0.1)
    assert done.status == "completed" and done.result is not None
    assert done.result["content"][0]["text"] == "rendered 1 frames"
    assert over.status == "cancelled"
    assert "done 2" not in _marks(tmp_path)  # the run on replica a was stopped
    outcomes = sorted((row["status"], row["error_code"]) for row in audited)
    assert outcomes == [("error", "cancelled"), ("ok", None)], audited  # each ran once


def _audit(url: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{url}/api/audit", headers={"Authorization": f"Bearer {TOKEN}"},
                       timeout=30)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["entries"])
