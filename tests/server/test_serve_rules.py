"""Rules from decisions and named operators in a real ``toolkeeper serve``, called with the
official MCP client: a decision that saves a rule runs the next similar call without asking and
still asks for another argument; a rule past its end stops deciding; a named operator's decision
is audited with their name; the ``decide`` policies keep a request from an operator they do not
allow (403, and no card); a rule is never wider than the request, and no client reaches one."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any, cast

import anyio
import httpx
import pytest

from ..processes import no_traceback
from ..workspaces import hand_over, reachable  # noqa: F401  (a fixture)
from .test_serve import CLIENT_TOKENS, TOKEN, _client, _start, _started

pytestmark = pytest.mark.anyio

TOOLS = '''
from typing import Any

from toolkeeper import Tool, ToolRisk, tool


def _fetch(address: str, headers: dict[str, str] | None = None) -> str:
    return f"fetched {address} with {sorted(headers or {})}"


fetch = Tool(name="fetch", description="Fetch a URL (a raw JSON Schema: no defaults).",
             parameters={"type": "object", "properties": {
                 "address": {"type": "string"},
                 "headers": {"type": "object", "additionalProperties": {"type": "string"}}},
                 "required": ["address"]},
             callable=_fetch, risk=ToolRisk.HIGH)


@tool(risk=ToolRisk.HIGH)
def configure(settings: dict[str, Any], ratio: float = 1.0, label: str = "") -> str:
    """Apply free-form settings."""
    return f"configured {sorted(settings)} at {ratio}"


@tool(risk=ToolRisk.HIGH)
def read_report(path: str) -> str:
    """Read a report."""
    return f"report {path}"


@tool(risk=ToolRisk.HIGH)
def payments_send(vendor: str, amount: int) -> str:
    """Pay a vendor."""
    return f"paid {vendor} {amount}"
'''
FINANCE = '''
@id("payments-by-finance")
@reason("payments are approved by finance")
forbid (principal, action == Action::"decide", resource)
when { resource.name like "payments_*" }
unless { principal == Operator::"finance" };
'''
OPERATOR = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "tools.py").write_text(TOOLS)
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "team.cedar").write_text(FINANCE)
    config = tmp_path / "toolkeeper.toml"
    config.write_text("")
    proc, url = _start(tmp_path, "--config", str(config), "--approval-wait", "30",
                       tools=str(tmp_path / "tools.py"))
    yield url
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=20) in (0, 130)
    no_traceback(proc)


def _cli(tmp_path: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "toolkeeper.cli", *args, "--state-dir",
                           str(tmp_path / "state")], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


async def _pending(url: str, tool: str, headers: dict[str, str] = OPERATOR) -> dict[str, Any]:
    """The pending request for ``tool`` (within 30 s, else the test fails with what was seen)."""
    deadline, seen = time.monotonic() + 30, []
    while time.monotonic() < deadline:
        seen = httpx.get(f"{url}/api/approvals?state=pending", headers=headers,
                         timeout=10).json()["approvals"]
        found = [a for a in seen if a["tool"] == tool]
        if found:
            return cast(dict[str, Any], found[0])
        await anyio.sleep(0.1)
    pytest.fail(f"no pending request for {tool} within 30 s; seen: {seen}")


async def _call(url: str, tool: str, **arguments: object) -> str:
    async with _client(url) as client:
        result = await client.call_tool(tool, arguments)
    text = result.content[0].text  # type: ignore[union-attr]
    if not result.is_error:
        return "ok: " + text
    return ("pending: " if "waiting for approval" in text else "refused: ") + text


async def _decided_with(url: str, tool: str, arguments: dict[str, object],
                        body: dict[str, Any], headers: dict[str, str] = OPERATOR
                        ) -> tuple[str, httpx.Response]:
    """Call ``tool`` (it asks), decide its request with ``body``; (the call's answer, the
    decision's response)."""
    answer: list[str] = []
    async with anyio.create_task_group() as group:
        async def call() -> None:
            answer.append(await _call(url, tool, **arguments))
        group.start_soon(call)
        request = await _pending(url, tool)
        decided = httpx.post(f"{url}/api/approvals/{request['id']}/decision", json=body,
                             headers=headers, timeout=30)
        if decided.status_code != 200:
            group.cancel_scope.cancel()
    return (answer[0] if answer else ""), decided


async def _until(url: str, tool: str, expect: str, **arguments: object) -> str:
    """Call until the answer starts with ``expect`` (30 s at most); the last answer."""
    deadline, seen = time.monotonic() + 30, ""
    while time.monotonic() < deadline:
        with anyio.move_on_after(3):  # a call that asks waits; that is an answer too
            seen = await _call(url, tool, **arguments)
            if seen.startswith(expect):
                return seen
            # Each poll is a new session of four requests: paced well under the client's
            # rate limit (50 requests a second), which a tight loop on a fast machine met.
            await anyio.sleep(0.25)
            continue
        seen = "pending: it waited for a person"
        if expect == "pending":
            return seen
    pytest.fail(f"{tool} did not answer {expect!r} within 30 s; last: {seen!r}")


def _audit(tmp_path: Path, tool: str) -> list[tuple[str, str, str]]:
    with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
        return db.execute("SELECT status, decision, approver FROM audit WHERE tool = ? "
                          "ORDER BY seq", (tool,)).fetchall()


async def test_a_rule_made_from_a_decision_runs_the_next_similar_call_and_asks_for_another(
        served: str, tmp_path: Path) -> None:
    answer, decided = await _decided_with(
        served, "read_report", {"path": "reports/q1.txt"},
        {"decision": "approve", "rule": {"args": {"path": "reports/*"}, "for": "8h"}})
    assert decided.status_code == 200, decided.text
    rule = decided.json()["rule"]
    assert answer == "ok: report reports/q1.txt"
    assert 'resource == Tool::"read_report"' in rule["cedar"]
    assert 'principal == Client::"default"' in rule["cedar"]
    assert 'context.args.path like "reports/*"' in rule["cedar"]
    assert rule["author"] == "operator:operator" and rule["expires"] is not None
    assert await _call(served, "read_report", path="reports/q2.txt") == \
        "ok: report reports/q2.txt"  # the rule decides at once, nobody is asked
    assert (await _until(served, "read_report", "pending", path="secrets/k")) \
        .startswith("pending")
    rows = _audit(tmp_path, "read_report")
    assert rows[0] == ("ok", "approved", f"operator:operator (rule {rule['id']})")
    assert rows[1] == ("ok", f"allowed by {rule['id']}", "policy")
    listed = httpx.get(f"{served}/api/rules", headers=OPERATOR, timeout=10).json()["rules"]
    assert [r["id"] for r in listed] == [rule["id"]]


async def test_allow_similar_pins_an_object_or_a_decimal_argument_to_the_value_sent(
        served: str, tmp_path: Path) -> None:
    asked = {"settings": {"log_level": "debug"}, "ratio": 0.5, "label": "ops"}
    answer, decided = await _decided_with(served, "configure", asked,
                                          {"decision": "approve", "rule": {"for": "24h"}})
    assert decided.status_code == 200, decided.text
    cedar = decided.json()["rule"]["cedar"]
    assert answer.startswith("ok: configured")
    assert "context.digests.settings == " in cedar and "context.digests has ratio" in cedar
    assert 'context.args.label == "ops"' in cedar, cedar
    again = await _call(served, "configure", **asked)  # the same call: the rule decides
    assert again.startswith("ok: configured"), again
    for other in ({**asked, "settings": {"allow_remote_root": True, "admin_password": ""}},
                  {**asked, "ratio": 0.75}):
        assert (await _until(served, "configure", "pending", **other)).startswith("pending")
    rows = _audit(tmp_path, "configure")
    assert [r[0] for r in rows].count("ok") == 2, rows  # nothing else ran


async def test_allow_similar_asks_again_for_a_call_that_adds_an_argument_the_first_did_not_send(
        served: str, tmp_path: Path) -> None:
    # a permit tested the arguments sent only: the same call with headers the approved one
    # did not send matched it and ran unasked
    _, decided = await _decided_with(served, "fetch", {"address": "https://api.example/x"},
                                     {"decision": "approve", "rule": {"for": "24h"}})
    assert decided.status_code == 200, decided.text
    cedar = decided.json()["rule"]["cedar"]
    assert "!(context.digests has headers)" in cedar, cedar
    assert (await _call(served, "fetch", address="https://api.example/x")
            ).startswith("ok: fetched")
    added = await _until(served, "fetch", "pending", address="https://api.example/x",
                         headers={"Authorization": "Bearer stolen"})
    assert added.startswith("pending"), added
    rows = _audit(tmp_path, "fetch")
    assert [r[0] for r in rows].count("ok") == 2, rows  # the approved call and its twin


async def test_a_rule_given_another_value_for_a_pinned_argument_is_refused(
        served: str) -> None:
    _, decided = await _decided_with(
        served, "configure", {"settings": {"log_level": "debug"}},
        {"decision": "approve", "rule": {"args": {"settings": {"log_level": "*"}}}})
    assert decided.status_code == 400, decided.text
    assert "taken exactly as sent" in decided.json()["message"]


async def test_a_rule_for_one_call_decides_the_next_similar_call_only(
        served: str, tmp_path: Path) -> None:
    _, decided = await _decided_with(
        served, "read_report", {"path": "reports/q1.txt"},
        {"decision": "approve", "rule": {"client": "any", "for": "once"}})
    assert decided.status_code == 200, decided.text
    assert "@once" in decided.json()["rule"]["cedar"]
    assert "principal," in decided.json()["rule"]["cedar"]  # any client
    assert await _call(served, "read_report", path="reports/q1.txt") == \
        "ok: report reports/q1.txt"
    assert (await _until(served, "read_report", "pending", path="reports/q1.txt")) \
        .startswith("pending")  # spent


async def test_an_expired_rule_stops_deciding(served: str) -> None:
    _, decided = await _decided_with(
        served, "read_report", {"path": "reports/q1.txt"},
        {"decision": "approve", "rule": {"args": {"path": "reports/*"}, "for": "6s"}})
    assert decided.status_code == 200, decided.text
    assert (await _until(served, "read_report", "ok", path="reports/q3.txt")).startswith("ok")
    assert (await _until(served, "read_report", "pending", path="reports/q3.txt")) \
        .startswith("pending")  # past its end, the default set asks again


@pytest.mark.parametrize(("rule", "refused"), [
    ({"text": 'permit (principal, action == Action::"payments_send", resource == '
              'Tool::"payments_send");'}, "this request's tool"),
    ({"text": 'permit (principal, action, resource == Tool::"read_report");'},
     "about calling the tool"),
    ({"text": 'permit (principal == Client::"other", action == Action::"read_report", '
              'resource == Tool::"read_report");'}, "this request's client"),
    ({"text": 'permit (principal, action == Action::"read_report", resource == '
              'Tool::"read_report") when { context.code_mode };'}, "context.code_mode"),
    ({"text": 'permit (principal, action in Action::"call_tool", resource);'},
     "this request's tool"),
    ({"text": 'forbid (principal, action == Action::"read_report", resource == '
              'Tool::"read_report");'}, "a forbid rule never approves a call"),
    ({"effect": "forbid"}, "the rule is a forbid rule but the decision is approve"),
    ({"args": {"folder": "x"}}, "no argument 'folder'"),
    ({"for": "forever"}, "rule duration 'forever'"),
])
async def test_a_rule_wider_than_the_request_is_refused_and_nothing_is_decided(
        served: str, rule: dict[str, object], refused: str) -> None:
    _, decided = await _decided_with(served, "read_report", {"path": "reports/q1.txt"},
                                     {"decision": "approve", "rule": rule})
    assert decided.status_code == 400 and refused in decided.json()["message"], decided.text
    still = await _pending(served, "read_report")
    assert still["state"] == "pending"  # the decision waits for a rule that fits
    assert httpx.get(f"{served}/api/rules", headers=OPERATOR, timeout=10).json()["rules"] == []


async def test_a_named_operator_decides_in_their_name_and_only_what_they_may(
        served: str, tmp_path: Path) -> None:
    alice = {"Authorization": f"Bearer {_cli(tmp_path, 'tokens', 'add', 'alice', '--operator')}"}
    finance = {"Authorization": "Bearer "
               + _cli(tmp_path, "tokens", "add", "finance", "--operator")}
    listed = _cli(tmp_path, "tokens", "list")
    assert "alice" in listed and "operator" in listed
    async with anyio.create_task_group() as group:
        group.start_soon(partial(_call, served, "payments_send", vendor="acme", amount=5))
        paying = await _pending(served, "payments_send", finance)
        assert httpx.get(f"{served}/api/approvals?state=pending", headers=OPERATOR,
                         timeout=10).json()["approvals"] == []  # not finance either
        seen = httpx.get(f"{served}/api/approvals?state=pending", headers=alice,
                         timeout=10).json()["approvals"]
        assert seen == []  # alice does not see what she may not decide
        assert httpx.get(f"{served}/api/approvals/{paying['id']}", headers=alice,
                         timeout=10).status_code == 404
        page = httpx.get(f"{served}/", headers=alice, timeout=10).text
        assert paying["id"] not in page and "payments_send" not in page
        refused = httpx.post(f"{served}/api/approvals/{paying['id']}/decision", headers=alice,
                             json={"decision": "approve"}, timeout=10)
        assert refused.status_code == 403, refused.text
        assert "policy payments-by-finance (payments are approved by finance)" in \
            refused.json()["message"] and "'alice'" in refused.json()["message"]
        assert paying["id"] in httpx.get(f"{served}/", headers=finance, timeout=10).text
        decided = httpx.post(f"{served}/api/approvals/{paying['id']}/decision",
                             headers=finance, json={"decision": "approve"}, timeout=10)
        assert decided.status_code == 200, decided.text
    answer, by_alice = await _decided_with(served, "read_report", {"path": "a"},
                                           {"decision": "approve"}, headers=alice)
    assert by_alice.status_code == 200 and answer == "ok: report a"
    assert _audit(tmp_path, "payments_send")[0] == ("ok", "approved", "operator:finance")
    assert _audit(tmp_path, "read_report")[0] == ("ok", "approved", "operator:alice")
    refused_mcp = httpx.post(f"{served}/mcp", headers={**alice, "Accept": "application/json"},
                             json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                             timeout=10)
    assert refused_mcp.status_code == 403  # a person's token is never an agent's


async def test_no_client_reads_makes_or_revokes_a_rule(served: str, tmp_path: Path) -> None:
    agent = {"Authorization": f"Bearer {CLIENT_TOKENS[served]}"}
    _, decided = await _decided_with(served, "read_report", {"path": "r"},
                                     {"decision": "approve", "rule": {"for": "8h"}})
    rule = decided.json()["rule"]["id"]
    async with anyio.create_task_group() as group:
        group.start_soon(partial(_call, served, "read_report", path="other"))
        own = await _pending(served, "read_report")
        for method, path, body in [
                ("GET", "/api/rules", None), ("POST", f"/api/rules/{rule}/revoke", None),
                ("GET", f"/api/approvals/{own['id']}/proposal", None),
                ("POST", f"/api/approvals/{own['id']}/decision",
                 {"decision": "approve", "rule": {"client": "any", "for": "revoked"}})]:
            answer = httpx.request(method, f"{served}{path}", headers=agent, json=body,
                                   timeout=10)
            assert answer.status_code == 403, (path, answer.text)
        page = httpx.get(f"{served}/rules", headers=agent, timeout=10)
        assert page.status_code == 403 and rule not in page.text
        httpx.post(f"{served}/api/approvals/{own['id']}/decision", headers=OPERATOR,
                   json={"decision": "deny"}, timeout=10)
    async with _client(served) as client:
        tools = [t.name for t in (await client.list_tools()).tools]
        resources = (await client.list_resources()).resources
    assert not any("rule" in t or "polic" in t for t in tools)
    assert not any("rule" in str(r.uri) or "polic" in str(r.uri) for r in resources)
    with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
        assert db.execute("SELECT COUNT(*) FROM policy_rules").fetchone()[0] == 1
    revoked = httpx.post(f"{served}/api/rules/{rule}/revoke", headers=OPERATOR, timeout=10)
    assert revoked.status_code == 200
    assert (await _until(served, "read_report", "pending", path="r")).startswith("pending")


async def test_no_built_in_tool_or_script_reaches_the_rule_store(
        tmp_path: Path, reachable: Path) -> None:  # noqa: F811
    project = reachable
    (project / "tools.py").write_text(TOOLS)
    config = project / "toolkeeper.toml"
    config.write_text('[codemode]\nenabled = true\nworkspace = "read"\n'
                      'tools = ["file_read", "file_write"]\n')
    store = tmp_path / "state" / "toolkeeper.db"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("TOOLKEEPER_")},
           "TOOLKEEPER_TOKEN": TOKEN}
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkeeper.cli", "serve", str(project / "tools.py"), "--port",
         "0", "--state-dir", str(tmp_path / "state"), "--approval-wait", "0", "--config",
         str(config), "--workspace", str(project)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
    url = _started(proc, tmp_path / "state")
    hand_over(project)
    script = (f"import sqlite3\ntry:\n    db = sqlite3.connect({str(store)!r})\n"
              "    db.execute(\"INSERT INTO policy_rules VALUES ('rule_x', 'me', '', 0, NULL, 0, "
              "'permit (principal, action, resource);', NULL)\")\n    db.commit()\n"
              "    result = 'wrote'\nexcept Exception as exc:\n    result = 'refused'\n"
              f"r = file_read(path={str(store)!r})\nprint(r.status)\n")
    try:
        async with _client(url) as client:
            read = await client.call_tool("file_read", {"path": str(store)})
            wrote = await client.call_tool("file_write", {"path": str(store), "content": "x"})
            ran = await client.call_tool("tool_chain", {"code": script})
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    assert read.is_error and "outside" in read.content[0].text  # type: ignore[union-attr]
    assert wrote.is_error
    assert ran.structured_content is not None, ran.content
    assert ran.structured_content["value"] == "refused", ran.content
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT COUNT(*) FROM policy_rules").fetchone()[0] == 0


async def test_a_named_operator_logs_in_to_the_page_and_decides_as_themselves(
        served: str, tmp_path: Path) -> None:
    _cli(tmp_path, "tokens", "add", "alice", "--operator")
    link = _cli(tmp_path, "approvals", "login-url", "--operator", "alice", "--url", served)
    browser = httpx.Client(base_url=served, follow_redirects=False, timeout=10)
    assert browser.get(link.removeprefix(served)).status_code == 303
    answer: list[str] = []
    async with anyio.create_task_group() as group:
        async def call() -> None:
            answer.append(await _call(served, "read_report", path="a"))
        group.start_soon(call)
        request = await _pending(served, "read_report")
        page = browser.get("/").text
        assert request["id"] in page
        form = {"csrf": page.split('name="csrf" value="')[1].split('"')[0],
                "digest": request["args_digest"], "decision": "approve"}
        done = browser.post(f"/approvals/{request['id']}/decide", data=form,
                            headers={"Origin": served})
        assert done.status_code == 303, done.text
    assert answer == ["ok: report a"]
    assert _audit(tmp_path, "read_report") == [("ok", "approved", "operator:alice")]
    refused = subprocess.run([sys.executable, "-m", "toolkeeper.cli", "approvals", "login-url",
                              "--operator", "bob", "--url", served, "--state-dir",
                              str(tmp_path / "state")], capture_output=True, text=True,
                             timeout=60)
    assert refused.returncode != 0 and "'bob' is not a named operator" in refused.stderr
    _cli(tmp_path, "tokens", "revoke", "alice")
    assert browser.get("/").status_code == 401  # her page session ended with her token
