"""Approvals over the workers of ``toolkeeper serve --workers 2``: a person's "approve for this
client" given while a call waited on one worker holds on every worker (the client's next calls
of that tool run without asking, wherever they land, and each audit row says who approved it);
the same call made on both workers while it waits runs once, and both callers get its result."""

from __future__ import annotations

import json
import sqlite3
import threading
from typing import Any

import httpx

from .test_serve_lifecycle import _until
from .test_serve_workers import MCP_HEADERS, WORKER, Served, _call, _result, served

__all__ = ["served"]


def test_approve_for_this_client_holds_on_every_worker(served: Served) -> None:
    caller = served.client(worker=1)
    answers: list[httpx.Response] = []
    waiting = threading.Thread(target=lambda: answers.append(_call(caller, "launch", {"n": 1})))
    waiting.start()
    operator = served.client(worker=1, operator=True)
    listed = _until(lambda: operator.get("/api/approvals?state=pending").json()["approvals"],
                    "the call's request stored")
    decided = operator.post(f"/api/approvals/{listed[0]['id']}/decision",
                            json={"decision": "approve", "scope": "session"})
    assert decided.status_code == 200, decided.text
    waiting.join(timeout=60)
    assert _result(answers[0])["content"][0]["text"] == "launched 1"
    for n, worker in ((2, 2), (3, 1), (4, 2)):  # with new arguments: the grant, not a rejoin
        answer = _call(served.client(worker=worker), "launch", {"n": n})
        assert answer.headers[WORKER] == str(worker)
        result = _result(answer)
        assert result["content"][0]["text"] == f"launched {n}", (worker, result)
    assert (served.state.parent / "marks").read_text().split("\n")[:-1] == [
        f"launch {n}" for n in (1, 2, 3, 4)]
    assert operator.get("/api/approvals?state=pending").json()["approvals"] == []
    with sqlite3.connect(served.state / "toolkeeper.db") as db:
        rows = db.execute("SELECT status, decision, approver FROM audit WHERE tool = 'launch' "
                          "ORDER BY ts").fetchall()
    assert [(status, decision) for status, decision, _ in rows] == [("ok", "approved")] * 4
    assert len({approver for _, _, approver in rows}) == 1 and rows[0][2]


def test_the_same_call_waiting_on_both_workers_runs_once_and_both_callers_get_its_result(
        served: Served) -> None:
    # a client that gave up after a few seconds and called again while its first call still
    # waited: whichever caller takes the approved request, the other is told that run's result
    first: list[httpx.Response] = []
    waiting = threading.Thread(target=lambda: first.append(
        _call(served.client(worker=1), "launch", {"n": 9})))
    waiting.start()
    operator = served.client(worker=2, operator=True)
    listed = _until(lambda: operator.get("/api/approvals?state=pending").json()["approvals"],
                    "the call's request stored")
    heard, second = threading.Event(), list[dict[str, Any]]()
    again = threading.Thread(target=lambda: second.extend(
        _told_progress(served.client(worker=2), "launch", {"n": 9}, heard)))
    again.start()
    assert heard.wait(timeout=60), "the call made again did not start waiting"
    decided = operator.post(f"/api/approvals/{listed[0]['id']}/decision",
                            json={"decision": "approve"})
    assert decided.status_code == 200, decided.text
    waiting.join(timeout=60)
    again.join(timeout=60)
    results = [_result(first[0]), next(m["result"] for m in second if "result" in m)]
    texts = sorted(result["content"][0]["text"] for result in results)
    assert texts[0] == "launched 9", texts
    assert texts[1].startswith("launched 9\n[this is the result of request "), texts
    assert not any(result.get("isError") for result in results), results
    assert (served.state.parent / "marks").read_text() == "launch 9\n"  # ran once
    with sqlite3.connect(served.state / "toolkeeper.db") as db:
        rows = db.execute("SELECT status, decision FROM audit WHERE tool = 'launch'").fetchall()
    assert sorted(rows) == [("ok", "approved"),
                            ("ok", "told again: the approved run's result; nothing ran")], rows


def _told_progress(client: httpx.Client, tool: str, arguments: dict[str, object],
                   heard: threading.Event) -> list[dict[str, Any]]:
    """A ``tools/call`` with a progress token, read as its event stream comes: ``heard`` is
    set at the first progress notification (the call is waiting for a person)."""
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": {"progressToken": "p"}}}
    messages: list[dict[str, Any]] = []
    with client.stream("POST", "/mcp", json=body, headers=MCP_HEADERS) as response:
        for line in response.iter_lines():
            if line.startswith("data:"):
                messages.append(json.loads(line[5:]))
                if messages[-1].get("method") == "notifications/progress":
                    heard.set()
    return messages
