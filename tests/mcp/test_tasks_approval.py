"""The wait for a person as an MCP task, against the real ``toolkeeper serve`` with the
official MCP Python client (its tasks extension as ``test_tasks`` declares it) and decisions
made through the approval API: a call that needs approval becomes a task saying a person must
decide and where; the result arrives when they decided, run once; denied and expired arrive as
their own outcomes; cancelling the task withdraws the request."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest

from ..server.test_serve import CLIENT_TOKENS, TOKEN, _start
from .test_tasks import (
    CancelTask,
    Created,
    Detailed,
    GetTask,
    TaskParams,
    Tasks,
    _client,
    _stop,
    poll,
)

TOOLS = '''
from pathlib import Path
from toolkeeper import ToolRisk, tool

MARKS = Path(__file__).with_name("marks")


@tool(risk=ToolRisk.CRITICAL)
def launch(n: int) -> str:
    """Launch run n (a person must approve it)."""
    with MARKS.open("a") as marks:
        marks.write(f"ran {n}\\n")
    return f"launched {n}"


@tool(risk=ToolRisk.CRITICAL, approval_ttl=3)
def hurry(n: int) -> str:
    """A launch whose request stays approvable for three seconds only."""
    with MARKS.open("a") as marks:
        marks.write(f"hurried {n}\\n")
    return f"hurried {n}"
'''

CHAIN = '[codemode]\nenabled = true\ntools = ["launch"]\n'
"""A config serving ``tool_chain`` over ``launch``: a script's call that needs a person."""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "tools.py").write_text(TOOLS)
    proc, url = _start(tmp_path, "--approval-wait", "1", tools=str(tmp_path / "tools.py"))
    yield url
    _stop(proc)


def _api(url: str, path: str, body: dict[str, object] | None = None) -> Any:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    answer = (httpx.get(f"{url}{path}", headers=headers, timeout=30) if body is None else
              httpx.post(f"{url}{path}", headers=headers, json=body, timeout=30))
    assert answer.status_code == 200, answer.text
    return answer.json()


def _marks(tmp_path: Path) -> list[str]:
    path = tmp_path / "marks"
    return path.read_text().splitlines() if path.exists() else []


async def _created(url: str, tool: str, arguments: dict[str, Any]) -> tuple[Any, Created]:
    """A client declaring tasks (open: the caller closes it) and the task its call became."""
    client = _client(url, CLIENT_TOKENS[url], [Tasks()])
    await client.__aenter__()
    created = await client.session.call_tool(tool, arguments, allow_claimed=True)
    assert isinstance(created, Created), created
    return client, created


async def _waiting(url: str) -> dict[str, Any]:
    end = time.monotonic() + 30
    while time.monotonic() < end:
        listed = _api(url, "/api/approvals?state=pending")["approvals"]
        if listed:
            (request,) = listed
            return dict(request)
        await anyio.sleep(0.05)
    raise AssertionError("no approval request waits after 30 s")


async def test_a_call_that_needs_a_person_becomes_a_task_and_runs_once_approved(
        served: str, tmp_path: Path) -> None:
    client, created = await _created(served, "launch", {"n": 1})
    try:
        request = await _waiting(served)
        assert created.status == "working"
        said = created.status_message or ""
        assert "a person must decide" in said and f"/approvals/{request['id']}" in said
        waiting = await client.session.send_request(
            GetTask(params=TaskParams(task_id=created.task_id)), Detailed)
        assert waiting.status == "working" and waiting.status_message == said
        assert _marks(tmp_path) == []
        _api(served, f"/api/approvals/{request['id']}/decision", {"decision": "approve"})
        done = await poll(client.session, created.task_id)
    finally:
        await client.__aexit__(None, None, None)
    assert done.status == "completed" and done.result is not None
    assert done.result["content"][0]["text"] == "launched 1"
    assert _marks(tmp_path) == ["ran 1"]  # run once
    assert _api(served, f"/api/approvals/{request['id']}")["state"] == "done"


async def test_denied_and_expired_arrive_as_their_own_outcomes(
        served: str, tmp_path: Path) -> None:
    client, denied = await _created(served, "launch", {"n": 2})
    try:
        request = await _waiting(served)
        _api(served, f"/api/approvals/{request['id']}/decision",
             {"decision": "deny", "message": "not today"})
        refused = await poll(client.session, denied.task_id)
        expiring = await client.session.call_tool("hurry", {"n": 3}, allow_claimed=True)
        assert isinstance(expiring, Created)
        expired = await poll(client.session, expiring.task_id)
    finally:
        await client.__aexit__(None, None, None)
    assert refused.status == "completed" and refused.result is not None
    assert refused.result["isError"] is True and "not today" in \
        refused.result["content"][0]["text"]
    assert expired.status == "completed" and expired.result is not None
    assert expired.result["isError"] is True and "expired" in \
        expired.result["content"][0]["text"]
    assert _marks(tmp_path) == []


async def test_cancelling_the_task_withdraws_the_request(served: str, tmp_path: Path) -> None:
    client, created = await _created(served, "launch", {"n": 4})
    try:
        request = await _waiting(served)
        await client.session.send_request(CancelTask(params=TaskParams(
            task_id=created.task_id)), types.Result)
        over = await poll(client.session, created.task_id)
    finally:
        await client.__aexit__(None, None, None)
    assert over.status == "cancelled"
    final = _api(served, f"/api/approvals/{request['id']}")
    assert final["state"] == "denied"
    assert final["decision"]["message"] == "withdrawn: the client cancelled its task"
    assert _marks(tmp_path) == []


async def test_a_scripts_call_that_needs_a_person_makes_its_tool_chain_call_a_task(
        tmp_path: Path) -> None:
    """Code mode: the call that waits is one the client's ``tool_chain`` script made; the
    script's call becomes the task as a call of the client's own does (not after the page's
    50 s wait), and the task's result is the script's output once approved."""
    (tmp_path / "tools.py").write_text(TOOLS)
    config = tmp_path / "toolkeeper.toml"
    config.write_text(CHAIN)
    proc, url = _start(tmp_path, "--approval-wait", "50", "--config", str(config),
                       tools=str(tmp_path / "tools.py"))
    try:
        client, created = await _created(url, "tool_chain", {
            "code": "r = launch(n=8)\nprint('launch said:', r.text)"})
        try:
            request = await _waiting(url)
            assert "a person must decide" in (created.status_message or "")
            assert f"/approvals/{request['id']}" in (created.status_message or "")
            _api(url, f"/api/approvals/{request['id']}/decision", {"decision": "approve"})
            done = await poll(client.session, created.task_id)
        finally:
            await client.__aexit__(None, None, None)
    finally:
        _stop(proc)
    assert done.status == "completed" and done.result is not None, done
    assert "launch said: launched 8" in done.result["content"][0]["text"], done.result
    assert _marks(tmp_path) == ["ran 8"]


async def test_a_call_made_again_while_its_request_waits_becomes_a_task_too(
        served: str, tmp_path: Path) -> None:
    client, first = await _created(served, "launch", {"n": 5})
    try:
        request = await _waiting(served)
        again = await client.session.call_tool("launch", {"n": 5}, allow_claimed=True)
        assert isinstance(again, Created), again  # not held open for the page's wait
        assert f"/approvals/{request['id']}" in (again.status_message or "")
        assert len(_api(served, "/api/approvals?state=pending")["approvals"]) == 1  # rejoined
        _api(served, f"/api/approvals/{request['id']}/decision", {"decision": "approve"})
        done = [await poll(client.session, task.task_id) for task in (first, again)]
    finally:
        await client.__aexit__(None, None, None)
    assert [task.status for task in done] == ["completed", "completed"], done
    texts = sorted(task.result["content"][0]["text"] for task in done if task.result)
    assert texts[0] == "launched 5" and texts[1].startswith("launched 5\n[this is the result")
    assert _marks(tmp_path) == ["ran 5"]  # run once


def _audited(tmp_path: Path, tool: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
        return db.execute("SELECT status, error_code FROM audit WHERE tool = ? ORDER BY seq",
                          (tool,)).fetchall()


async def test_a_task_that_waited_longer_than_the_approval_wait_leaves_one_audit_row(
        tmp_path: Path) -> None:
    """The client was answered with the task, never 'pending': its call is one row, with its
    real outcome (``--approval-wait 0``: any wait for a person is longer)."""
    (tmp_path / "tools.py").write_text(TOOLS)
    proc, url = _start(tmp_path, "--approval-wait", "0", tools=str(tmp_path / "tools.py"))
    try:
        client, created = await _created(url, "launch", {"n": 6})
        try:
            request = await _waiting(url)
            _api(url, f"/api/approvals/{request['id']}/decision", {"decision": "approve"})
            done = await poll(client.session, created.task_id)
        finally:
            await client.__aexit__(None, None, None)
        end = time.monotonic() + 30
        while ("ok", None) not in _audited(tmp_path, "launch") and time.monotonic() < end:
            await anyio.sleep(0.05)
    finally:
        _stop(proc)
    assert done.status == "completed" and done.result is not None
    assert done.result["content"][0]["text"] == "launched 6"
    assert _audited(tmp_path, "launch") == [("ok", None)]
