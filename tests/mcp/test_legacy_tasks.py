"""MCP tasks in the 2025-11-25 form against the real ``toolkeeper serve``: the client
declares the ``tasks`` capability, sends ``tools/call`` with ``params.task`` and follows the
task with ``tasks/get``, ``tasks/result``, ``tasks/list`` and ``tasks/cancel``. The official
Python client has no tasks API for that revision, so these are its raw JSON-RPC requests."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ..server.test_serve import CLIENT_TOKENS, _start, _tokens
from .test_tasks import TOOLS, _audit, _stop
from .test_tasks_approval import TOOLS as APPROVED_TOOLS
from .test_tasks_approval import _api, _marks

LEGACY = "2025-11-25"
LEGACY_TOOLS = TOOLS + '''
from toolkeeper import ToolContext


@tool
def plain(word: str) -> str:
    """Say a word (a plain call, never a task)."""
    return f"said {word}"


@tool(task_support="optional")
async def greet(ctx: ToolContext) -> str:
    """Ask the user's name, then greet them."""
    answer = await ctx.elicit("Your name?", {"type": "object", "properties": {}}, key="name")
    return f"hello {answer['content']}"
'''
APPROVED = APPROVED_TOOLS.replace("@tool(risk=ToolRisk.CRITICAL)\n",
                                  '@tool(risk=ToolRisk.CRITICAL, task_support="optional")\n')
"""``launch`` needs a person and may run as a task (``hurry`` only ever as a plain call)."""
CAPS: dict[str, Any] = {"tasks": {"requests": {"tools": {"call": {}}}, "list": {}, "cancel": {}}}


class Wire:
    """One 2025-11-25 client speaking raw JSON-RPC to ``/mcp``."""

    def __init__(self, url: str, token: str, caps: dict[str, Any] | None = None) -> None:
        self.http = httpx.Client(base_url=url, timeout=60, headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream"})
        self.caps, self.ids = CAPS if caps is None else caps, 0

    def post(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.ids += 1
        reply = self.http.post("/mcp", json={"jsonrpc": "2.0", "id": self.ids,
                                             "method": method, "params": params})
        assert reply.status_code == 200, reply.text
        if "mcp-session-id" in reply.headers:  # serve --sessions: the session it opened
            self.http.headers["mcp-session-id"] = reply.headers["mcp-session-id"]
        if reply.headers["content-type"].startswith("application/json"):
            found: dict[str, Any] = reply.json()
            return found
        for line in reply.text.splitlines():
            if line.startswith("data:") and '"id"' in line:
                message: dict[str, Any] = json.loads(line[5:])
                if message.get("id") == self.ids:
                    return message
        raise AssertionError(f"no answer to {method} in {reply.text!r}")

    def initialize(self) -> dict[str, Any]:
        answer = self.post("initialize", {"protocolVersion": LEGACY, "capabilities": self.caps,
                                          "clientInfo": {"name": "raw", "version": "1"}})
        self.http.headers["mcp-protocol-version"] = LEGACY
        return answer["result"]  # type: ignore[no-any-return]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "tools.py").write_text(LEGACY_TOOLS)
    proc, url = _start(tmp_path, tools=str(tmp_path / "tools.py"))
    yield url
    _stop(proc)


def test_the_server_declares_tasks_to_a_2025_11_25_client(served: str) -> None:
    caps = Wire(served, CLIENT_TOKENS[served]).initialize()["capabilities"]
    assert caps["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}


def test_a_task_augmented_call_is_followed_to_its_result(served: str) -> None:
    wire = Wire(served, CLIENT_TOKENS[served])
    wire.initialize()
    created = wire.post("tools/call", {"name": "render", "arguments": {"frames": 3},
                                       "task": {"ttl": 60_000}})
    task = created["result"]["task"]
    assert task["status"] == "working" and task["taskId"], created
    result = wire.post("tasks/result", {"taskId": task["taskId"]})["result"]
    assert result["content"][0]["text"] == "rendered 3 frames" and not result.get("isError")
    got = wire.post("tasks/get", {"taskId": task["taskId"]})["result"]
    assert got["status"] == "completed" and got["taskId"] == task["taskId"]
    listed = wire.post("tasks/list", {})["result"]["tasks"]
    assert [t["taskId"] for t in listed] == [task["taskId"]]


def test_a_task_is_its_clients_alone_and_cancel_ends_it(served: str, tmp_path: Path) -> None:
    added = _tokens(tmp_path, "add", "mallory")
    assert added.returncode == 0, added.stderr
    owner, other = Wire(served, CLIENT_TOKENS[served]), Wire(served, added.stdout.strip())
    owner.initialize()
    other.initialize()
    task = owner.post("tools/call", {"name": "render", "arguments": {"frames": 2, "seconds": 30},
                                     "task": {"ttl": 60_000}})["result"]["task"]
    hidden = other.post("tasks/get", {"taskId": task["taskId"]})
    assert hidden["error"]["code"] == -32602 and "not this client's" in hidden["error"]["message"]
    assert other.post("tasks/list", {})["result"]["tasks"] == []
    cancelled = owner.post("tasks/cancel", {"taskId": task["taskId"]})["result"]
    assert cancelled["status"] == "cancelled"


def test_on_a_stateless_connection_a_task_that_asks_its_client_ends_at_once_saying_why(
        served: str) -> None:
    """Stateless HTTP has no way to ask the client anything (not even through
    ``tasks/result``): the task fails at once, naming the fix, rather than wait forever."""
    wire = Wire(served, CLIENT_TOKENS[served])
    wire.initialize()
    task = wire.post("tools/call", {"name": "greet", "arguments": {},
                                    "task": {"ttl": 60_000}})["result"]["task"]
    error = wire.post("tasks/result", {"taskId": task["taskId"]})["error"]
    assert error["code"] == -32600, error
    assert "cannot carry a request back to the client" in error["message"]
    assert "--sessions" in error["message"]
    assert wire.post("tasks/get", {"taskId": task["taskId"]})["result"]["status"] == "failed"


@pytest.fixture
def approving(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "tools.py").write_text(APPROVED)
    proc, url = _start(tmp_path, "--approval-wait", "1", tools=str(tmp_path / "tools.py"))
    yield url
    _stop(proc)


def _said(wire: Wire, task_id: str, words: str) -> dict[str, Any]:
    """``tasks/get`` until the task's status message says ``words`` (within 30 s)."""
    end, seen = time.monotonic() + 30, dict[str, Any]()
    while time.monotonic() < end:
        seen = dict(wire.post("tasks/get", {"taskId": task_id})["result"])
        if words in (seen.get("statusMessage") or ""):
            return seen
        time.sleep(0.05)
    raise AssertionError(f"the task never said {words!r}: {seen}")


def test_a_wait_for_a_person_is_a_task_that_ends_once_approved(
        approving: str, tmp_path: Path) -> None:
    wire = Wire(approving, CLIENT_TOKENS[approving])
    wire.initialize()
    task = wire.post("tools/call", {"name": "launch", "arguments": {"n": 1},
                                    "task": {"ttl": 60_000}})["result"]["task"]
    waiting = _said(wire, task["taskId"], "a person must decide")
    (request,) = _api(approving, "/api/approvals?state=pending")["approvals"]
    assert waiting["status"] == "working" and f"/approvals/{request['id']}" in \
        waiting["statusMessage"] and _marks(tmp_path) == []
    _api(approving, f"/api/approvals/{request['id']}/decision", {"decision": "approve"})
    result = wire.post("tasks/result", {"taskId": task["taskId"]})["result"]
    assert result["content"][0]["text"] == "launched 1"
    assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task["taskId"]}
    assert _marks(tmp_path) == ["ran 1"]  # run once


def test_cancelling_a_waiting_task_withdraws_its_request(approving: str) -> None:
    wire = Wire(approving, CLIENT_TOKENS[approving])
    wire.initialize()
    task = wire.post("tools/call", {"name": "launch", "arguments": {"n": 4},
                                    "task": {"ttl": 60_000}})["result"]["task"]
    _said(wire, task["taskId"], "a person must decide")
    (request,) = _api(approving, "/api/approvals?state=pending")["approvals"]
    assert wire.post("tasks/cancel", {"taskId": task["taskId"]})["result"]["status"] == \
        "cancelled"
    again = wire.post("tasks/cancel", {"taskId": task["taskId"]})["error"]
    assert again["code"] == -32602 and "already cancelled" in again["message"]
    final = _api(approving, f"/api/approvals/{request['id']}")
    assert final["state"] == "denied"
    assert final["decision"]["message"] == "withdrawn: the client cancelled its task"


def test_a_waiting_task_whose_ttl_ends_withdraws_its_request(
        approving: str, tmp_path: Path) -> None:
    """Nobody waits for the call any more: its request leaves the page, as when cancelled
    (it could be approved, then taken by the next call made the same way)."""
    wire = Wire(approving, CLIENT_TOKENS[approving])
    wire.initialize()
    task = wire.post("tools/call", {"name": "launch", "arguments": {"n": 5},
                                    "task": {"ttl": 2000}})["result"]["task"]
    request = _until("the call's request stored", lambda: _api(
        approving, "/api/approvals?state=pending")["approvals"])[0]
    final = _until("the request decided", lambda: (lambda found: found["state"] != "pending"
                   and found)(_api(approving, f"/api/approvals/{request['id']}")))
    assert final["state"] == "denied", final
    assert final["decision"]["message"].startswith("withdrawn: the client's task expired")
    gone = wire.post("tasks/get", {"taskId": task["taskId"]})["error"]
    assert gone["code"] == -32602
    rows = _until("the run's audit row", lambda: [
        row for row in _audit(approving) if row["tool"] == "launch"])
    assert [(row["status"], row["error_code"]) for row in rows] == [("error", "cancelled")]
    assert _marks(tmp_path) == []


def test_a_tool_that_does_not_run_as_a_task_refuses_params_task(served: str) -> None:
    """A tool declared without task support (``forbidden``, the default) is not run as a task
    when the call asks for one: the spec's -32601, saying how to call it instead."""
    wire = Wire(served, CLIENT_TOKENS[served])
    wire.initialize()
    refused = wire.post("tools/call", {"name": "plain", "arguments": {"word": "hi"},
                                       "task": {"ttl": 60_000}})
    assert refused["error"]["code"] == -32601, refused
    said = refused["error"]["message"]
    assert "'plain' does not run as a task" in said and "without params.task" in said
    assert 'task_support="optional"' in said
    assert wire.post("tasks/list", {})["result"]["tasks"] == []  # nothing was made
    plain = wire.post("tools/call", {"name": "plain", "arguments": {"word": "hi"}})["result"]
    assert plain["content"][0]["text"] == "said hi"


def test_a_task_only_tool_called_plainly_says_to_send_params_task(served: str) -> None:
    wire = Wire(served, CLIENT_TOKENS[served])
    wire.initialize()
    refused = wire.post("tools/call", {"name": "export", "arguments": {"name": "a.txt"}})
    assert refused["error"]["code"] == -32601, refused
    said = refused["error"]["message"]
    assert "'export' runs only as a task" in said and "params.task" in said
    assert "tasks/result" in said and "extension" not in said  # no 2026-07-28 advice
    task = wire.post("tools/call", {"name": "export", "arguments": {"name": "a.txt"},
                                    "task": {"ttl": 60_000}})["result"]["task"]
    result = wire.post("tasks/result", {"taskId": task["taskId"]})["result"]
    assert result["content"][0]["text"] == "exported a.txt"


@pytest.fixture
def replicas(tmp_path: Path, postgres_url: str) -> Iterator[list[str]]:
    """Two ``serve`` processes on one PostgreSQL store; one client token for both."""
    (tmp_path / "tools.py").write_text(LEGACY_TOOLS)
    started = [_start(tmp_path, "--store", postgres_url, tools=str(tmp_path / "tools.py"),
                      state=f"r{i}") for i in range(2)]
    CLIENT_TOKENS[started[1][1]] = CLIENT_TOKENS[started[0][1]]
    yield [url for _, url in started]
    for proc, _ in started:
        _stop(proc)


def _until(what: str, found: Callable[[], Any]) -> Any:
    """``found()`` once it is truthy (within 60 s, else the test says what it waited for)."""
    end, seen = time.monotonic() + 60, None
    while time.monotonic() < end:
        seen = found()
        if seen:
            return seen
        time.sleep(0.05)
    raise AssertionError(f"{what}: never; last seen {seen!r}")


def test_a_replica_answers_for_a_2025_task_another_runs_and_cancels_it(
        replicas: list[str], tmp_path: Path) -> None:
    a, b = (Wire(url, CLIENT_TOKENS[url]) for url in replicas)
    a.initialize()
    b.initialize()
    quick = a.post("tools/call", {"name": "render", "arguments": {"frames": 1},
                                  "task": {"ttl": 60_000}})["result"]["task"]["taskId"]
    result = b.post("tasks/result", {"taskId": quick})["result"]  # waits on the other replica
    assert result["content"][0]["text"] == "rendered 1 frames"
    assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": quick}
    assert b.post("tasks/get", {"taskId": quick})["result"]["status"] == "completed"
    slow = a.post("tools/call", {"name": "render", "arguments": {"frames": 2, "seconds": 600},
                                 "task": {"ttl": 60_000}})["result"]["task"]["taskId"]
    _until("the slow task started", lambda: "start 2" in _lines(tmp_path / "marks"))
    listed = [t["taskId"] for t in b.post("tasks/list", {})["result"]["tasks"]]
    cancelled = b.post("tasks/cancel", {"taskId": slow})["result"]
    assert listed == [quick, slow] and cancelled["status"] == "cancelled"
    assert a.post("tasks/get", {"taskId": slow})["result"]["status"] == "cancelled"
    ended = b.post("tasks/result", {"taskId": slow})["error"]
    assert ended["code"] == -32602 and "was cancelled" in ended["message"], ended
    audited = _until("the run on replica a was stopped and audited", lambda: sorted(
        (row["status"], row["error_code"]) for row in _audit(replicas[0])
        if row["tool"] == "render") if len(_audit(replicas[0])) >= 2 else None)
    assert audited == [("error", "cancelled"), ("ok", None)], audited  # each ran once
    assert "done 2" not in _lines(tmp_path / "marks")


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []
