"""MCP tasks over the workers of ``toolkeeper serve --sessions --workers 2``, with raw
2026-07-28 requests of a client that declares the tasks extension: a call that became a task
because it waits for a person runs on the worker that took it, and a ``tasks/cancel`` that
lands on the other worker stops that run within a poll, recorded as cancelled."""

from __future__ import annotations

import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp_types import CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY

from ..server.test_serve import _start
from .test_serve_lifecycle import _until
from .test_serve_workers import MCP_HEADERS, WORKER, Served, _result

TOOLS = '''
import asyncio
from pathlib import Path

from toolkeeper import ToolRisk, tool

MARKS = Path(__file__).with_name("marks")


@tool(risk=ToolRisk.CRITICAL)
async def deploy(n: int, seconds: float = 10.0) -> str:
    """Deploy run n, slowly: a person decides (declared without task support)."""
    with MARKS.open("a") as marks:
        marks.write(f"start {n}\\n")
    await asyncio.sleep(seconds)
    with MARKS.open("a") as marks:
        marks.write(f"done {n}\\n")
    return f"deployed {n}"
'''
VERSION = "2026-07-28"
EXTENSION = "io.modelcontextprotocol/tasks"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    (tmp_path / "tools.py").write_text(TOOLS)
    proc, url = _start(tmp_path, "--workers", "2", "--sessions", "--approval-wait", "3",
                       tools=str(tmp_path / "tools.py"))
    yield Served(proc, url, tmp_path / "state")
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def _modern(client: httpx.Client, method: str, params: dict[str, Any], name: str
            ) -> tuple[dict[str, Any], str]:
    """A 2026-07-28 request of a client declaring the tasks extension: its result, and the
    worker that answered it."""
    meta = {PROTOCOL_VERSION_META_KEY: VERSION,
            CLIENT_INFO_META_KEY: {"name": "tasks-test", "version": "1"},
            CLIENT_CAPABILITIES_META_KEY: {"extensions": {EXTENSION: {}}}}
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    response = client.post("/mcp", json=body, headers={
        **MCP_HEADERS, "Mcp-Protocol-Version": VERSION, "Mcp-Method": method, "Mcp-Name": name})
    return _result(response), response.headers[WORKER]


def _marks(served: Served) -> list[str]:
    path = served.state.parent / "marks"
    return path.read_text().splitlines() if path.exists() else []


def _audited(served: Served, tool: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(served.state / "toolkeeper.db") as db:
        return db.execute("SELECT status, error_code FROM audit WHERE tool = ?",
                          (tool,)).fetchall()


def test_a_cancel_on_the_other_worker_stops_a_call_that_became_a_task_waiting_for_a_person(
        served: Served) -> None:
    created, worker = _modern(served.client(worker=1), "tools/call",
                              {"name": "deploy", "arguments": {"n": 1}}, "deploy")
    assert (created["resultType"], worker) == ("task", "1"), created
    operator = served.client(worker=1, operator=True)
    listed = _until(lambda: operator.get("/api/approvals?state=pending").json()["approvals"],
                    "the call's request stored")
    decided = operator.post(f"/api/approvals/{listed[0]['id']}/decision",
                            json={"decision": "approve"})
    assert decided.status_code == 200, decided.text
    _until(lambda: "start 1" in _marks(served), "the approved call started on worker 1")
    cancelled, worker = _modern(served.client(worker=2), "tasks/cancel",
                                {"taskId": created["taskId"]}, created["taskId"])
    assert worker == "2", cancelled
    rows = _until(lambda: _audited(served, "deploy"), "the run's audit row")
    assert rows == [("error", "cancelled")]  # stopped within a poll, not run to its end
    assert _marks(served) == ["start 1"]
    got, _ = _modern(served.client(worker=1), "tasks/get", {"taskId": created["taskId"]},
                     created["taskId"])
    assert got["status"] == "cancelled"
