"""The approval page's login and the JSON API of a real ``toolkeeper serve`` process, over HTTP:
one-time login links, cookies, CSRF and Origin checks, clients kept apart, decisions bound to
the arguments, the first decision wins, and a resumable event stream."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from ..blocks import text_of
from ..processes import no_traceback, readable
from .test_serve import CLIENT_TOKENS, EXAMPLE, TOKEN, _client, _remember, _tokens

ALERT = {"alert": {"region": "PT-11", "level": "red", "message": "Storm"}}


def start_page(tmp_path: Path, *args: str, tools: str = EXAMPLE, builtins: bool = False
               ) -> tuple[subprocess.Popen[str], str, str]:
    """A server with the example tools (or ``tools``, and the built-ins over ``--workspace``
    with ``builtins``): (process, base URL, one-time login URL)."""
    env = {**os.environ, "TOOLKEEPER_TOKEN": TOKEN}
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkeeper.cli", "serve", tools,
         *([] if builtins else ["--no-builtins"]), "--port", "0",
         "--state-dir", str(tmp_path / "state"), "--approval-wait", "0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    assert proc.stdout is not None
    # The two lines are printed together: once the first arrives, read both (a select on the
    # pipe would miss a second line already in the reader's buffer).
    ready = readable([proc.stdout], 60)
    lines = [proc.stdout.readline(), proc.stdout.readline()] if ready else ["", ""]
    if not lines[0].startswith("toolkeeper serving on ") or "/login?code=" not in lines[1]:
        proc.kill()
        pytest.fail(f"serve did not start: {lines!r}")
    _remember(lines[0].split()[3], tmp_path / "state")
    return proc, lines[0].split()[3], lines[1].split()[2]


def stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=20) in (0, 130)
    no_traceback(proc)


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
    return text_of(result.content[0]).split("(request ")[1].split(")")[0]


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
    assert again.is_error and "not today" in text_of(again.content[0])


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


@contextmanager
def _serving(app: Any) -> Iterator[str]:
    """``app`` on a real loopback HTTP server (uvicorn in a thread): its base URL."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()


class _Links(HTMLParser):
    """Every address a page refers to (href, src, action)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found += [v for k, v in attrs if k in ("href", "src", "action") and v is not None]


def _links(page: str) -> list[str]:
    parser = _Links()
    parser.feed(page)
    return parser.found


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[tuple[str, Any, Any]]:
    """A ``WebApprovalHandler`` mounted at /approvals of an app of your own, with a
    critical tool ``pay`` whose calls wait for it: (base URL, handler, invoker)."""
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from toolkeeper import ToolInvoker, ToolRisk, tool
    from toolkeeper.approval import SqliteApprovalStore
    from toolkeeper.invoke.audit import SqliteAuditLog
    from toolkeeper.server import WebApprovalHandler

    @tool(risk=ToolRisk.CRITICAL)
    def pay(to: str, amount: int) -> str:
        """Pay someone."""
        return f"paid {amount} to {to}"

    audit = SqliteAuditLog(tmp_path / "a.db")
    handler = WebApprovalHandler(SqliteApprovalStore(tmp_path / "a.db"), wait_s=0, audit=audit)
    invoker = ToolInvoker([pay], handler, audit=audit)
    app = Starlette(routes=[Mount("/approvals", handler.app(token="lib-token",
                                                            catalog=invoker.registry))])
    with _serving(app) as url:
        yield url, handler, invoker


async def _ask(invoker: Any, **arguments: Any) -> str:
    from toolkeeper.core.call import ToolCall

    async with invoker.open_session() as session:
        result = await invoker.invoke(ToolCall(id="c", name="pay", arguments=arguments),
                                      session=session)
    assert result.status == "pending"
    return str(result.approval_id)


async def test_the_handler_mounted_at_a_prefix_keeps_every_link_form_and_redirect_under_it(
        mounted: tuple[str, Any, Any]) -> None:
    url, handler, invoker = mounted
    request_id = await _ask(invoker, to="eve", amount=9000)
    browser = httpx.Client(base_url=url, follow_redirects=False)
    login = browser.get(handler.login_url(f"{url}/approvals").removeprefix(url))
    assert login.status_code == 303 and login.headers["location"] == "/approvals/"
    assert "Path=/approvals" in login.headers["set-cookie"]
    page = browser.get("/approvals/")
    assert page.status_code == 200 and request_id in page.text
    links = [link for link in _links(page.text) if not link.startswith("#")]
    assert links and all(link.startswith("/approvals/") for link in links), links
    assert "/approvals/favicon.ico" in links and "/approvals/static/app.css" in links
    for link in {link for link in links
                 if not link.endswith(("/decide", "/logout", "/batch", "/rule"))}:
        assert browser.get(link).status_code == 200, link
    icon = browser.get("/approvals/favicon.ico")
    assert icon.headers["content-type"].startswith("image/svg+xml")
    assert 'data-root="/approvals"' in page.text  # the script's fetches follow it too
    assert "Approve for this client for 15 min" in page.text
    assert httpx.get(f"{url}/approvals/api/approvals").status_code == 401  # gated under it
    form = {"csrf": _csrf(page.text), "decision": "approve",
            "digest": page.text.split('name="digest" value="')[1].split('"')[0]}
    done = browser.post(f"/approvals/approvals/{request_id}/decide", data=form,
                        headers={"Origin": url})
    assert done.status_code == 303 and done.headers["location"] == "/approvals/"
    shown = httpx.get(f"{url}/approvals/api/approvals/{request_id}",
                      headers=_bearer("lib-token")).json()
    assert shown["state"] == "approved"
    detail = browser.get(f"/approvals/approvals/{request_id}").text
    assert "approved by operator:operator, 20" in detail  # who, and when
    out = browser.post("/approvals/logout", data={"csrf": _csrf(detail)},
                       headers={"Origin": url})
    assert out.status_code == 303 and out.headers["location"] == "/approvals/"
    assert "Path=/approvals" in out.headers["set-cookie"]


async def test_history_shows_a_status_once_and_refuses_a_bad_since(
        mounted: tuple[str, Any, Any]) -> None:
    url, handler, invoker = mounted
    await _ask(invoker, to="bob", amount=1)
    browser = httpx.Client(base_url=url, follow_redirects=True)
    browser.get(handler.login_url(f"{url}/approvals").removeprefix(url))
    history = browser.get("/approvals/history")
    assert history.status_code == 200 and "<td>pending</td>" in history.text
    assert "pending (pending)" not in history.text
    for bad in ("yesterday", "nan", "inf"):
        page = browser.get("/approvals/history", params={"since": bad})
        assert page.status_code == 400 and 'id="problem"' in page.text
        assert "&#39;since&#39; must be a time in seconds since 1970" in page.text
        api = httpx.get(f"{url}/approvals/api/audit", params={"since": bad},
                        headers=_bearer("lib-token"))
        assert api.status_code == 400 and api.json()["error"] == "bad_request"
    since = browser.get("/approvals/history", params={"since": "0"})
    assert since.status_code == 200 and "<td>pending</td>" in since.text
    later = httpx.get(f"{url}/approvals/api/audit", params={"since": str(time.time() + 60)},
                      headers=_bearer("lib-token"))
    assert later.status_code == 200 and later.json()["entries"] == []


def _store_request(handler: Any, *, expires_at: float | None = None) -> str:
    from toolkeeper import ToolRisk
    from toolkeeper.approval.models import ApprovalRequest, args_digest

    arguments = {"to": "eve", "amount": 5}
    request = ApprovalRequest(call_id="c9", tool="pay", risk=ToolRisk.CRITICAL,
                              arguments=arguments, args_digest=args_digest(arguments),
                              session_id="ses_1", expires_at=expires_at)
    handler.store.create(request)
    return request.id


@pytest.mark.parametrize(("approver", "said"), [
    ("timeout", "approved automatically after the timeout"),
    ("fire_and_continue", "ran without waiting"),
])
def test_a_rules_decision_is_said_in_words(mounted: tuple[str, Any, Any], approver: str,
                                          said: str) -> None:
    from toolkeeper.approval.models import ApprovalDecision

    url, handler, _ = mounted
    request_id = _store_request(handler)
    assert handler.store.decide(ApprovalDecision(request_id=request_id, outcome="approved",
                                                 approver=approver))
    browser = httpx.Client(base_url=url, follow_redirects=True)
    browser.get(handler.login_url(f"{url}/approvals").removeprefix(url))
    detail = browser.get(f"/approvals/approvals/{request_id}").text
    assert said in detail and f"by {approver}" not in detail


def test_a_card_past_its_expiry_offers_no_decision(mounted: tuple[str, Any, Any]) -> None:
    url, handler, _ = mounted
    expired = _store_request(handler, expires_at=time.time() - 1)
    live = _store_request(handler, expires_at=time.time() + 600)
    browser = httpx.Client(base_url=url, follow_redirects=True)
    browser.get(handler.login_url(f"{url}/approvals").removeprefix(url))
    page = browser.get(f"/approvals/approvals/{expired}").text
    assert "Expired: it can no longer be approved" in page
    assert "/decide" not in page and "expires:" not in page and "Approve" not in page
    inbox = browser.get("/approvals/").text
    assert f"/approvals/approvals/{live}/decide" in inbox
    assert f"/approvals/approvals/{expired}/decide" not in inbox


def test_a_tools_own_view_reaches_the_page_escaped(mounted: tuple[str, Any, Any]) -> None:
    from toolkeeper.server.cards import RowsSection, register_card_view

    url, handler, _ = mounted
    register_card_view("pay", lambda a: [RowsSection(title="payment", rows=[
        ("to", f"<img src=x onerror=alert(1)>{a['to']}")])])
    try:
        request_id = _store_request(handler)
        browser = httpx.Client(base_url=url, follow_redirects=True)
        browser.get(handler.login_url(f"{url}/approvals").removeprefix(url))
        page = browser.get(f"/approvals/approvals/{request_id}").text
    finally:
        register_card_view("pay", None)
    assert "&lt;img src=x onerror=alert(1)&gt;eve" in page and "<img" not in page
    assert "Every argument as sent" in page  # what the view may leave out, folded below
