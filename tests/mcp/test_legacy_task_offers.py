"""The wait for a person as a task for a 2025-11-25 client that declared tasks, whatever task
support the tool's author declared: against the real ``toolkeeper serve``, a CRITICAL tool
declared without task support is listed ``optional`` to such a client (and to no other), and
its call with ``params.task`` is a task that says a person must decide and where, ends once
they approved through the API, and ran (and was audited) once. Raw JSON-RPC, as
``test_legacy_tasks`` speaks it, on a session (``--sessions``): what a client declared at its
handshake is known to its later requests only there (and on stdio)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..server.test_serve import CLIENT_TOKENS, _start
from .test_legacy_tasks import Wire, _said, _until
from .test_tasks import _audit, _stop
from .test_tasks_approval import TOOLS as APPROVED
from .test_tasks_approval import _api, _marks

TOOLS = APPROVED + '''

@tool
def plain(word: str) -> str:
    """Say a word (safe: nobody is asked)."""
    return f"said {word}"
'''


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "tools.py").write_text(TOOLS)
    proc, url = _start(tmp_path, "--sessions", "--approval-wait", "1",
                       tools=str(tmp_path / "tools.py"))
    yield url
    _stop(proc)


def _listed(wire: Wire) -> dict[str, Any]:
    wire.initialize()
    tools = wire.post("tools/list", {})["result"]["tools"]
    return {tool["name"]: tool.get("execution") for tool in tools}


def test_a_tool_that_waits_for_a_person_is_listed_optional_to_a_tasks_client_only(
        served: str) -> None:
    token = CLIENT_TOKENS[served]
    tasks_client = _listed(Wire(served, token))
    assert tasks_client["launch"] == {"taskSupport": "optional"}, tasks_client
    assert tasks_client["hurry"] == {"taskSupport": "optional"}, tasks_client
    assert tasks_client["plain"] is None, tasks_client  # nobody is asked: no task to offer
    other = Wire(served, token, caps={})  # a client without tasks: the tools as declared
    assert _listed(other) == {"hurry": None, "launch": None, "plain": None}
    refused = other.post("tools/call", {"name": "launch", "arguments": {"n": 1},
                                        "task": {"ttl": 60_000}})
    assert refused["error"]["code"] == -32601, refused  # held to what it was listed
    assert "'launch' does not run as a task" in refused["error"]["message"]


def test_a_call_that_waits_for_a_person_becomes_a_task_approved_through_the_api(
        served: str, tmp_path: Path) -> None:
    wire = Wire(served, CLIENT_TOKENS[served])
    wire.initialize()
    created = wire.post("tools/call", {"name": "launch", "arguments": {"n": 7},
                                       "task": {"ttl": 60_000}})
    assert "result" in created, created
    task = created["result"]["task"]
    assert task["status"] == "working" and task["taskId"], task
    waiting = _said(wire, task["taskId"], "a person must decide")
    (request,) = _api(served, "/api/approvals?state=pending")["approvals"]
    assert f"/approvals/{request['id']}" in waiting["statusMessage"], waiting
    assert _marks(tmp_path) == []
    _api(served, f"/api/approvals/{request['id']}/decision", {"decision": "approve"})
    result = wire.post("tasks/result", {"taskId": task["taskId"]})["result"]
    assert result["content"][0]["text"] == "launched 7" and not result.get("isError")
    assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task["taskId"]}
    assert wire.post("tasks/get", {"taskId": task["taskId"]})["result"]["status"] == "completed"
    assert _marks(tmp_path) == ["ran 7"]  # run once
    ran = _until("the approved call was audited", lambda: [
        row["status"] for row in _audit(served) if row["tool"] == "launch"
        and row["status"] == "ok"])
    assert ran == ["ok"], _audit(served)


NOTES = TOOLS + '''

@tool
def read_note(path: str) -> str:
    """Read a note (safe, but the operator's policy asks about secrets)."""
    return f"note {path}"
'''
ASK = '''@id("secrets-ask") @ask
permit (principal, action == Action::"read_note", resource)
when { context.args.path like "secrets/*" };
'''


@pytest.fixture
def governed(tmp_path: Path) -> Iterator[str]:
    """serve with an operator's policy that asks a person about some calls of a safe tool."""
    (tmp_path / "tools.py").write_text(NOTES)
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "team.cedar").write_text(ASK)
    (tmp_path / "toolkeeper.toml").write_text("")
    proc, url = _start(tmp_path, "--sessions", "--approval-wait", "1", "--config",
                       str(tmp_path / "toolkeeper.toml"), tools=str(tmp_path / "tools.py"))
    yield url
    _stop(proc)


def test_a_safe_tool_an_operator_policy_asks_about_is_offered_as_a_task(
        governed: str) -> None:
    wire = Wire(governed, CLIENT_TOKENS[governed])
    listed = _listed(wire)
    assert listed["read_note"] == {"taskSupport": "optional"}, listed
    assert listed["plain"] is None, listed  # no policy asks about it
    created = wire.post("tools/call", {"name": "read_note", "arguments": {"path": "secrets/k"},
                                       "task": {"ttl": 60_000}})
    assert "result" in created, created
    task = created["result"]["task"]
    _said(wire, task["taskId"], "a person must decide")
    (request,) = _api(governed, "/api/approvals?state=pending")["approvals"]
    _api(governed, f"/api/approvals/{request['id']}/decision", {"decision": "approve"})
    result = wire.post("tasks/result", {"taskId": task["taskId"]})["result"]
    assert result["content"][0]["text"] == "note secrets/k"
