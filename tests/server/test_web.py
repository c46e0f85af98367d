"""The approval page's login and the JSON API of a real ``toolkeeper serve`` process, over HTTP:
one-time login links, cookies, CSRF and Origin checks, clients kept apart, decisions bound to
the arguments, the first decision wins, and a resumable event stream."""

from __future__ import annotations

import json
import os
import select
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from .test_serve import CLIENT_TOKENS, EXAMPLE, TOKEN, _client, _remember, _tokens

ALERT = {"alert": {"region": "PT-11", "level": "red", "message": "Storm"}}


def start_page(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], str, str]:
    """A server with the example tools: (process, base URL, one-time login URL)."""
    env = {**os.environ, "TOOLKEEPER_TOKEN": TOKEN}
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkeeper.cli", "serve", EXAMPLE, "--no-builtins", "--port", "0",
         "--state-dir", str(tmp_path / "state"), "--approval-wait", "0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    assert proc.stdout is not None
    # The two lines are printed together: once the first arrives, read both (a select on the
    # pipe would miss a second line already in the reader's buffer).
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    lines = [proc.stdout.readline(), proc.stdout.readline()] if ready else ["", ""]
    if not lines[0].startswith("toolkeeper serving on ") or "/login?code=" not in lines[1]:
        proc.kill()
        pytest.fail(f"serve did not start: {lines!r}")
    _remember(lines[0].split()[3], tmp_path / "state")
    return proc, lines[0].split()[3], lines[1].split()[2]


def stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=20) in (0, 130)
    assert proc.stderr is not None and "Traceback" not in proc.stderr.read()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, str]]:
    proc, url, login = start_page(tmp_path)
    yield url, login
    stop(proc)


def _bearer(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _pending_call(url: str, token: str | None = None, **alert: str) -> str:
    """Make the example's critical tool ask for approval over MCP; the request id."""
    arguments = {"alert": {**ALERT["alert"], **alert}}
    async with _client(url, token) as client:
        result = await client.call_tool("broadcast_alert", arguments)
    assert result.is_error
    return result.content[0].text.split("(request ")[1].split(")")[0]


def _login(url: str, login: str) -> httpx.Client:
    browser = httpx.Client(base_url=url, follow_redirects=False)
    response = browser.get(login.removeprefix(url))
    assert response.status_code == 303 and response.headers["location"] == "/"
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    return browser


def _csrf(page: str) -> str:
    return page.split('name="csrf" value="')[1].split('"')[0]


def test_the_login_link_works_once_and_the_page_needs_it(served: tuple[str, str]) -> None:
    url, login = served
    assert httpx.get(f"{url}/").status_code == 401  # no cookie: the login page
    browser = _login(url, login)
    page = browser.get("/")
    assert page.status_code == 200 and "Waiting for a decision" in page.text
    for header, value in (("x-frame-options", "DENY"), ("x-content-type-options", "nosniff"),
                          ("referrer-policy", "same-origin")):
        assert page.headers[header] == value
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp
    again = httpx.get(login, follow_redirects=False)
    assert again.status_code == 401 and "used or" in again.text  # once only
    foreign = httpx.get(f"{url}/", headers={"Host": "evil.example:80"})
    assert foreign.status_code == 403  # DNS rebinding


async def test_clients_see_only_their_own_requests_and_only_the_operator_decides(
        tmp_path: Path) -> None:
    bob = _tokens(tmp_path, "add", "bob").stdout.strip()
    eve = _tokens(tmp_path, "add", "eve").stdout.strip()
    proc, url, _ = start_page(tmp_path)
    try:
        bobs = await _pending_call(url, bob, region="BOB-1")
        eves = await _pending_call(url, eve, region="EVE-1")
        listed = httpx.get(f"{url}/api/approvals?state=pending", headers=_bearer(bob)).json()
        assert [a["id"] for a in listed["approvals"]] == [bobs]
        assert listed["approvals"][0]["client"] == "bob"
        assert listed["approvals"][0]["arguments"]["alert"]["region"] == "BOB-1"
        everything = httpx.get(f"{url}/api/approvals", headers=_bearer()).json()
        assert {a["id"] for a in everything["approvals"]} == {bobs, eves}
        assert httpx.get(f"{url}/api/approvals/{eves}", headers=_bearer(bob)).status_code == 404
        own = httpx.post(f"{url}/api/approvals/{bobs}/decision", headers=_bearer(bob),
                         json={"decision": "approve"})
        assert own.status_code == 403 and "only the operator" in own.json()["message"]
        audit = httpx.get(f"{url}/api/audit", headers=_bearer(eve)).json()["entries"]
        assert audit and {e["client"] for e in audit} == {"eve"}
        assert httpx.get(f"{url}/api/approvals", headers=_bearer("wrong")).status_code == 401
    finally:
        stop(proc)


async def test_a_decision_is_bound_to_the_arguments_and_the_first_one_wins(
        served: tuple[str, str], tmp_path: Path) -> None:
    url, _ = served
    request_id = await _pending_call(url)
    shown = httpx.get(f"{url}/api/approvals/{request_id}", headers=_bearer()).json()
    stale = httpx.post(f"{url}/api/approvals/{request_id}/decision", headers=_bearer(),
                       json={"decision": "approve", "args_digest": "0" * 64})
    assert stale.status_code == 409 and stale.json()["error"] == "mismatch"
    denied = httpx.post(f"{url}/api/approvals/{request_id}/decision", headers=_bearer(),
                        json={"decision": "deny", "message": "not today",
                              "args_digest": shown["args_digest"]})
    assert denied.status_code == 200 and denied.json()["state"] == "denied"
    replay = httpx.post(f"{url}/api/approvals/{request_id}/decision", headers=_bearer(),
                        json={"decision": "approve"})
    assert replay.status_code == 409 and replay.json()["error"] == "already_decided"
    final = httpx.get(f"{url}/api/approvals/{request_id}", headers=_bearer()).json()
    assert final["state"] == "denied" and final["decision"]["message"] == "not today"
    with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
        refused = db.execute("SELECT decision FROM audit WHERE approval_id = ? AND decision "
                             "LIKE 'refused%'", (request_id,)).fetchall()
    assert len(refused) == 1  # the mismatched attempt is on record
    async with _client(url) as client:  # the model is told, and nothing ran
        again = await client.call_tool("broadcast_alert", ALERT)
    assert again.is_error and "not today" in again.content[0].text


async def test_forms_need_the_csrf_token_and_this_servers_origin(
        served: tuple[str, str]) -> None:
    url, login = served
    request_id = await _pending_call(url)
    browser = _login(url, login)
    page = browser.get("/").text
    assert request_id in page
    csrf = _csrf(page)
    digest = page.split('name="digest" value="')[1].split('"')[0]
    form = {"csrf": csrf, "digest": digest, "decision": "approve"}
    no_origin = browser.post(f"/approvals/{request_id}/decide", data=form)
    assert no_origin.status_code == 403
    elsewhere = browser.post(f"/approvals/{request_id}/decide", data=form,
                             headers={"Origin": "http://127.0.0.1:1"})  # another local port
    assert elsewhere.status_code == 403
    forged = browser.post(f"/approvals/{request_id}/decide", data={**form, "csrf": "x" * 64},
                          headers={"Origin": url})
    assert forged.status_code == 403
    api_without = browser.post(f"/api/approvals/{request_id}/decision",
                               json={"decision": "approve"}, headers={"Origin": url})
    assert api_without.status_code == 403 and api_without.json()["error"] == "csrf"
    assert httpx.get(f"{url}/api/approvals/{request_id}",
                     headers=_bearer()).json()["state"] == "pending"  # nothing was decided
    done = browser.post(f"/approvals/{request_id}/decide", data=form, headers={"Origin": url})
    assert done.status_code == 303
    assert httpx.get(f"{url}/api/approvals/{request_id}",
                     headers=_bearer()).json()["state"] == "approved"


async def test_the_event_stream_resumes_from_the_last_event_id(served: tuple[str, str]) -> None:
    url, _ = served
    first = await _pending_call(url)

    async def read_events(headers: dict[str, str], count: int) -> list[tuple[int, dict[str, str]]]:
        found: list[tuple[int, dict[str, str]]] = []
        async with httpx.AsyncClient(base_url=url, timeout=10) as http, \
                http.stream("GET", "/api/approvals/events", headers={**_bearer(), **headers}
                            ) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            seq = 0
            with anyio.fail_after(10):
                async for line in response.aiter_lines():
                    if line.startswith("id: "):
                        seq = int(line[4:])
                    elif line.startswith("data: "):
                        found.append((seq, json.loads(line[6:])))
                        if len(found) == count:
                            break
        return found

    (created,) = await read_events({"Last-Event-ID": "0"}, 1)
    assert created[1] == {"id": first, "state": "pending"}
    httpx.post(f"{url}/api/approvals/{first}/decision", headers=_bearer(),
               json={"decision": "deny"})
    (decided,) = await read_events({"Last-Event-ID": str(created[0])}, 1)
    assert decided[1] == {"id": first, "state": "denied"} and decided[0] > created[0]


async def test_web_approval_handler_serves_the_same_page_in_an_app_of_your_own(
        tmp_path: Path) -> None:
    import socket
    import threading

    import uvicorn

    from toolkeeper import ToolInvoker, ToolRisk, tool
    from toolkeeper.approval import SqliteApprovalStore
    from toolkeeper.core.call import ToolCall
    from toolkeeper.server import WebApprovalHandler

    ran: list[str] = []

    @tool(risk=ToolRisk.CRITICAL)
    def pay(amount: int) -> str:
        """Pay someone."""
        ran.append(f"paid {amount}")
        return f"paid {amount}"

    handler = WebApprovalHandler(SqliteApprovalStore(tmp_path / "a.db"), wait_s=20,
                                 poll_s=0.02)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(handler.app(token="lib-token"), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        invoker = ToolInvoker([pay], handler)

        async def approve_when_listed() -> None:
            async with httpx.AsyncClient(base_url=url, headers=_bearer("lib-token")) as http:
                with anyio.fail_after(15):
                    while True:
                        listed = (await http.get("/api/approvals?state=pending")).json()
                        if listed.get("approvals"):
                            break
                        await anyio.sleep(0.05)
                (request,) = listed["approvals"]
                assert request["arguments"] == {"amount": 7}
                decided = await http.post(f"/api/approvals/{request['id']}/decision",
                                          json={"decision": "approve"})
                assert decided.status_code == 200

        async with invoker.open_session() as session, anyio.create_task_group() as group:
            group.start_soon(approve_when_listed)
            result = await invoker.invoke(ToolCall(id="c", name="pay", arguments={"amount": 7}),
                                          session=session)
        assert result.ok and ran == ["paid 7"]
        page = httpx.get(handler.login_url(url), follow_redirects=True)
        assert page.status_code == 200 and "Waiting for a decision" in page.text
    finally:
        server.should_exit = True
        thread.join(timeout=20)


def test_a_public_host_behind_a_load_balancer_is_served_and_others_refused(
        tmp_path: Path) -> None:
    proc, url, _ = start_page(tmp_path, "--public-host", "tools.example.com")
    try:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        headers = {**_bearer(CLIENT_TOKENS[url]), "Accept": "application/json, text/event-stream"}
        for host, ok in (("tools.example.com", True), ("tools.example.com:443", True),
                         ("evil.example.com", False)):
            listed = httpx.post(f"{url}/mcp", json=body, headers={**headers, "Host": host})
            page = httpx.get(f"{url}/api/approvals", headers={**_bearer(), "Host": host})
            assert (listed.status_code == 200) is ok, (host, listed.status_code)
            assert (page.status_code == 200) is ok, (host, page.status_code)
            assert ("broadcast_alert" in listed.text) is ok
    finally:
        stop(proc)
