"""The inbox through the real ``toolkeeper serve``: a decision with edited arguments (checked
against the tool's schema, run once, told to the model, audited with both digests) and several
decisions in one request (each its own, bound to its own digest)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import httpx

from toolkeeper.approval.models import args_digest

from ..blocks import text_of
from .test_metrics import _scrape
from .test_serve import _client
from .test_web import ALERT, _bearer, _csrf, _login, _pending_call, served, start_page, stop

__all__ = ["served"]


async def test_an_edited_approval_runs_once_with_the_edit_and_the_model_is_told(
        served: tuple[str, str], tmp_path: Path) -> None:
    url, _ = served
    request_id = await _pending_call(url)
    shown = httpx.get(f"{url}/api/approvals/{request_id}", headers=_bearer()).json()
    edited = {"alert": {**ALERT["alert"], "region": "PT-13", "message": "Storm, calmer"}}
    decision = f"{url}/api/approvals/{request_id}/decision"
    wrong = httpx.post(decision, headers=_bearer(), json={
        "decision": "approve", "args_digest": shown["args_digest"],
        "arguments": {"alert": {"region": "PT-13", "level": "purple"}}})
    assert wrong.status_code == 400 and wrong.json()["error"] == "bad_arguments"
    assert "level" in wrong.json()["message"]  # what is wrong, before anything is recorded
    on_deny = httpx.post(decision, headers=_bearer(), json={"decision": "deny",
                                                            "arguments": edited})
    assert on_deny.status_code == 400 and "approve" in on_deny.json()["message"]
    approved = httpx.post(decision, headers=_bearer(), json={
        "decision": "approve", "args_digest": shown["args_digest"], "arguments": edited})
    assert approved.status_code == 200, approved.text
    body = approved.json()
    assert body["state"] == "approved" and body["args_digest"] == shown["args_digest"]
    assert body["run_digest"] == args_digest(edited)
    async with _client(url) as client:  # the client's retry of the asked call
        ran = await client.call_tool("broadcast_alert", ALERT)
        again = await client.call_tool("broadcast_alert", ALERT)
    text = text_of(ran.content[0]) + text_of(ran.content[1])
    assert not ran.is_error and "alert for PT-13 sent to all" in text
    assert "a person edited the arguments" in text and "Changed: alert" in text
    assert "alert for PT-13" in text_of(again.content[0]) and "does not run twice" in \
        text_of(again.content[0])
    with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
        rows = db.execute("SELECT args_digest, decision FROM audit WHERE approval_id = ? AND "
                          "status = 'ok'", (request_id,)).fetchall()  # the asked call's row
    ran_rows = [r for r in rows if r[1].startswith("approved")]
    assert ran_rows == [(args_digest(ALERT), f"approved with edited arguments (ran "
                         f"{args_digest(edited)}; changed: alert)")]


async def test_several_decisions_in_one_request_are_each_bound_and_audited(
        served: tuple[str, str]) -> None:
    url, _ = served
    ids = [await _pending_call(url, region=f"B-{n}") for n in range(3)]
    digests = {i: httpx.get(f"{url}/api/approvals/{i}", headers=_bearer()).json()["args_digest"]
               for i in ids}
    batch = httpx.post(f"{url}/api/approvals/decisions", headers=_bearer(), json={"decisions": [
        {"id": ids[0], "decision": "approve", "args_digest": digests[ids[0]]},
        {"id": ids[1], "decision": "deny", "args_digest": digests[ids[1]],
         "message": "wrong region, use B-9"},
        {"id": ids[2], "decision": "approve", "args_digest": "0" * 64}]})
    assert batch.status_code == 200, batch.text
    assert batch.json()["results"] == [
        {"id": ids[0], "state": "approved"}, {"id": ids[1], "state": "denied"},
        {"id": ids[2], "error": "mismatch", "message": batch.json()["results"][2]["message"]}]
    states = [httpx.get(f"{url}/api/approvals/{i}", headers=_bearer()).json()["state"]
              for i in ids]
    assert states == ["approved", "denied", "pending"]
    async with _client(url) as client:  # the denial's reason reaches the model
        told = await client.call_tool("broadcast_alert",
                                      {"alert": {**ALERT["alert"], "region": "B-1"}})
    assert told.is_error and "wrong region, use B-9" in text_of(told.content[0])
    empty = httpx.post(f"{url}/api/approvals/decisions", headers=_bearer(), json={})
    assert empty.status_code == 400 and "decisions" in empty.json()["message"]


async def test_a_tool_the_config_says_never_expires_outlives_the_default(tmp_path: Path
                                                                          ) -> None:
    config = tmp_path / "toolkeeper.toml"
    config.write_text('[approval]\nttl = { broadcast_alert = "never" }\n')
    proc, url, login = start_page(tmp_path, "--config", str(config), "--approval-ttl", "1")
    try:
        request_id = await _pending_call(url)
        shown = httpx.get(f"{url}/api/approvals/{request_id}", headers=_bearer()).json()
        assert shown["expires_at"] - shown["created_at"] > 50 * 365 * 86400
        card = _login(url, login).get(f"/approvals/{request_id}").text
        assert "<dt>expires</dt><dd>never</dd>" in card
    finally:
        stop(proc)


async def test_the_queues_figures_are_in_metrics_and_on_the_page(
        served: tuple[str, str]) -> None:
    url, login = served
    ids = [await _pending_call(url, region=f"M-{n}") for n in range(3)]
    for request_id in ids[:2]:
        decided = httpx.post(f"{url}/api/approvals/{request_id}/decision", headers=_bearer(),
                             json={"decision": "deny", "message": "no"})
        assert decided.status_code == 200
    samples = _scrape(url)
    assert samples[("toolkeeper_approvals_pending", ())] == 1
    assert samples[("toolkeeper_approvals_oldest_waiting_seconds", ())] > 0
    median = samples[("toolkeeper_approval_time_to_decision_seconds", (("quantile", "0.5"),))]
    p95 = samples[("toolkeeper_approval_time_to_decision_seconds", (("quantile", "0.95"),))]
    assert 0 < median <= p95
    page = _login(url, login).get("/").text
    assert 'id="figures"' in page and "1 waiting" in page and "0 expired" in page
    assert "median" in page and "p95" in page


async def test_an_edit_is_previewed_through_the_cards_own_view_as_a_diff(tmp_path: Path
                                                                         ) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "notes.txt").write_text("one\ntwo\nthree\n")
    (tmp_path / "tools.py").write_text(
        "from toolkeeper import tool\n\n\n@tool\ndef echo(text: str) -> str:\n"
        "    \"\"\"Echo.\"\"\"\n    return text\n")
    proc, url, login = start_page(tmp_path, "--workspace", str(tmp_path / "ws"),
                                  tools=str(tmp_path / "tools.py"), builtins=True)
    try:
        async with _client(url) as client:
            asked = await client.call_tool("file_write", {"path": "notes.txt",
                                                          "content": "one\nTWO\nthree\n"})
        request_id = text_of(asked.content[0]).split("(request ")[1].split(")")[0]
        browser = _login(url, login)
        csrf = _csrf(browser.get("/").text)
        edit = {"path": "notes.txt", "content": "one\ntwo\nthree\nfour\n"}
        shown = browser.post(f"/approvals/{request_id}/preview", headers={"origin": url},
                             data={"csrf": csrf, "arguments": json.dumps(edit)})
        assert shown.status_code == 200, shown.text
        assert "block-diff" in shown.text and "four" in shown.text and "TWO" not in shown.text
        wrong = browser.post(f"/approvals/{request_id}/preview", headers={"origin": url},
                             data={"csrf": csrf, "arguments": '{"path": 3}'})
        assert wrong.status_code == 400 and "do not fit" in wrong.text
        stale = browser.post(f"/approvals/{request_id}/preview", headers={"origin": url},
                             data={"csrf": "forged", "arguments": json.dumps(edit)})
        assert stale.status_code == 403
        state = httpx.get(f"{url}/api/approvals/{request_id}", headers=_bearer()).json()
        assert state["state"] == "pending"  # a preview decides nothing
    finally:
        stop(proc)


async def test_the_api_pages_and_filters_the_queue_as_the_inbox_does(
        served: tuple[str, str]) -> None:
    url, _ = served
    ids = [await _pending_call(url, region=f"Q-{n}") for n in range(3)]
    queue = httpx.get(f"{url}/api/approvals/queue?q=q-1", headers=_bearer()).json()
    assert [a["id"] for a in queue["approvals"]] == [ids[1]]
    assert (queue["total"], queue["page"], queue["pages"]) == (1, 1, 1)
    everything = httpx.get(f"{url}/api/approvals/queue", headers=_bearer()).json()
    assert [a["id"] for a in everything["approvals"]] == ids  # the oldest first
    bad = httpx.get(f"{url}/api/approvals/queue?risk=low", headers=_bearer())
    assert bad.status_code == 400 and "risk must be one of" in bad.json()["message"]
