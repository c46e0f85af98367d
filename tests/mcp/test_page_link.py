"""The wait for a person shown at the MCP client as a link to the approval card (URL-mode
elicitation), against the real ``toolkeeper serve`` with the official MCP Python client, which
declares URL elicitation when it answers elicitations; decisions through the approval API.

2026-07-28 (no tasks extension): the call answers ``input_required`` with the link, the client
retries with its answer and the retried call rejoins the same request, returning the result
once decided; denied and expired are their own results. 2025-11-25 with a session: the client
is sent ``elicitation/create`` in URL mode while the call waits, and told it is complete."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from ..server.test_serve import CLIENT_TOKENS, TOKEN, _start
from .test_tasks import _stop
from .test_tasks_approval import CHAIN, TOOLS  # launch, and hurry: approvable for 3 s only

pytestmark = pytest.mark.anyio


@pytest.fixture
def tools(tmp_path: Path) -> str:
    (tmp_path / "tools.py").write_text(TOOLS)
    return str(tmp_path / "tools.py")


class Shown:
    """What the client was shown (the elicitations' parameters) and told (notifications)."""

    def __init__(self) -> None:
        self.asked: list[types.ElicitRequestParams] = []
        self.methods: list[str] = []


def _text(result: types.CallToolResult) -> str:
    first = result.content[0]
    assert isinstance(first, types.TextContent), result
    return first.text


def _client(url: str | None, shown: Shown, *, mode: str = "auto", elicits: bool = True,
            transport: Any = None) -> Client:
    """The official client, over HTTP to ``url`` or over ``transport`` (stdio)."""
    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        shown.asked.append(params)
        return types.ElicitResult(action="accept")

    async def heard(message: Any) -> None:
        method = getattr(message, "method", None) or getattr(
            getattr(message, "root", None), "method", None)
        if isinstance(method, str):
            shown.methods.append(method)

    if transport is None:
        assert url is not None
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {CLIENT_TOKENS[url]}"},
                                  timeout=60)
        transport = streamable_http_client(f"{url}/mcp", http_client=http)
    return Client(transport, mode=mode,
                  elicitation_callback=elicit if elicits else None, message_handler=heard)


def _decide_when_shown(url: str | None, shown: Shown, decision: str | None
                       ) -> threading.Thread:
    """A person who, once the client showed the link, opens the card and decides there
    (``decision``; ``None``: nobody decides) on the page at ``url`` (``None``: the link's).
    Bounded: after 60 s without a link the test reports what it saw."""

    def person() -> None:
        end = time.monotonic() + 60
        while not shown.asked and time.monotonic() < end:
            time.sleep(0.02)
        if not shown.asked or decision is None:
            return
        link = getattr(shown.asked[0], "url", "")
        page, request_id = url or link.split("/approvals/")[0], link.rsplit("/", 1)[-1]
        answered = httpx.post(f"{page}/api/approvals/{request_id}/decision", timeout=10,
                              json={"decision": decision, "message": "not today"},
                              headers={"Authorization": f"Bearer {TOKEN}"})
        assert answered.status_code == 200, answered.text

    thread = threading.Thread(target=person, daemon=True)
    thread.start()
    return thread


def _requests(tmp_path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
        rows = db.execute("SELECT state, decision FROM approvals").fetchall()
    return [(state, json.loads(decision)["outcome"] if decision else "")
            for state, decision in rows]


def _marks(tmp_path: Path) -> list[str]:
    marks = tmp_path / "marks"
    return marks.read_text().splitlines() if marks.exists() else []


def _link_of(shown: Shown, url: str) -> str:
    assert len(shown.asked) == 1, shown.asked
    (asked,) = shown.asked
    assert isinstance(asked, types.ElicitRequestURLParams), asked
    assert asked.url.startswith(f"{url}/approvals/apr_"), asked.url
    assert "'launch' (risk critical)" in asked.message or "'hurry'" in asked.message
    return asked.url


@pytest.fixture
def served(tmp_path: Path, tools: str) -> Iterator[str]:
    proc, url = _start(tmp_path, "--approval-wait", "50", tools=tools)
    yield url
    _stop(proc)


@pytest.mark.parametrize(("decision", "ran"), [("approve", True), ("deny", False)])
async def test_a_2026_client_is_shown_the_card_and_its_retry_returns_the_decided_result(
        served: str, tmp_path: Path, decision: str, ran: bool) -> None:
    shown = Shown()
    person = _decide_when_shown(served, shown, decision)
    async with _client(served, shown) as client:
        assert client.session.protocol_version == "2026-07-28"
        result = await client.call_tool("launch", {"n": 1})
    person.join(timeout=10)
    link = _link_of(shown, served)
    # the link carries no credential: opening it asks the approver to sign in
    assert httpx.get(link, timeout=10).status_code == 401
    assert result.is_error is not ran, result
    text = _text(result)
    assert ("launched 1" in text) if ran else ("not today" in text and "not approved" in text)
    assert _marks(tmp_path) == (["ran 1"] if ran else [])  # run once, or not at all
    # the retried call rejoined the request the link names: one request, decided once
    assert _requests(tmp_path) == [("done", "approved") if ran else ("denied", "denied")]


async def test_a_2026_client_is_shown_the_card_of_its_scripts_call_at_once(
        tmp_path: Path, tools: str) -> None:
    """Code mode: the script's call needs a person; the run pauses as soon as the request is
    stored (not after the page's 50 s wait), the client is answered with the card's link, and
    its retry resumes the script once decided."""
    config = tmp_path / "toolkeeper.toml"
    config.write_text(CHAIN)
    proc, url = _start(tmp_path, "--approval-wait", "50", "--config", str(config), tools=tools)
    try:
        shown = Shown()
        person = _decide_when_shown(url, shown, "approve")
        with anyio.fail_after(40):  # under the page's wait: the link came first
            async with _client(url, shown) as client:
                assert client.session.protocol_version == "2026-07-28"
                result = await client.call_tool("tool_chain", {
                    "code": "r = launch(n=7)\nprint('launch said:', r.text)"})
        person.join(timeout=10)
    finally:
        _stop(proc)
    _link_of(shown, url)
    assert not result.is_error and "launch said: launched 7" in _text(result), result
    assert _marks(tmp_path) == ["ran 7"]
    assert _requests(tmp_path) == [("done", "approved")]


async def test_a_2026_client_is_told_when_nobody_decided_in_time(
        served: str, tmp_path: Path) -> None:
    shown = Shown()
    async with _client(served, shown) as client:
        result = await client.call_tool("hurry", {"n": 2})
    _link_of(shown, served)
    assert result.is_error and "nobody decided" in _text(result), result
    assert _marks(tmp_path) == []
    assert _requests(tmp_path) == [("expired", "expired")]


async def test_a_client_that_takes_no_url_elicitation_keeps_todays_wait(
        tmp_path: Path, tools: str) -> None:
    proc, url = _start(tmp_path, "--approval-wait", "0", tools=tools)
    try:
        shown = Shown()
        async with _client(url, shown, elicits=False) as client:
            result = await client.call_tool("launch", {"n": 3})
    finally:
        _stop(proc)
    assert shown.asked == []
    assert result.is_error and "waiting for approval" in _text(result)
    assert "/approvals/apr_" in _text(result)  # where a person decides
    assert _requests(tmp_path) == [("pending", "")]


@pytest.mark.parametrize(("tool", "arguments", "said", "config"), [
    ("launch", {"n": 4}, "launched 4", ""),
    # code mode: the call that waits is one the client's script made; the client is shown
    # its card as for a call of its own, and the script goes on once decided
    ("tool_chain", {"code": "r = launch(n=4)\nprint('launch said:', r.text)"},
     "launch said: launched 4", CHAIN)], ids=["its own call", "its script's call"])
async def test_a_2025_client_with_a_session_is_sent_the_card_while_the_call_waits(
        tmp_path: Path, tools: str, tool: str, arguments: dict[str, Any], said: str,
        config: str) -> None:
    (tmp_path / "toolkeeper.toml").write_text(config)
    proc, url = _start(tmp_path, "--approval-wait", "50", "--sessions", "--config",
                       str(tmp_path / "toolkeeper.toml"), tools=tools)
    try:
        shown = Shown()
        person = _decide_when_shown(url, shown, "approve")
        async with _client(url, shown, mode="legacy") as client:
            assert client.session.protocol_version == "2025-11-25"
            result = await client.call_tool(tool, arguments)
            end = time.monotonic() + 30  # the notification may trail the result
            while "notifications/elicitation/complete" not in shown.methods and \
                    time.monotonic() < end:
                await anyio.sleep(0.05)
        person.join(timeout=10)
    finally:
        _stop(proc)
    _link_of(shown, url)
    assert not result.is_error and said in _text(result), result
    # told the wait in a log line too, and that it is over
    assert "notifications/message" in shown.methods, shown.methods
    assert "notifications/elicitation/complete" in shown.methods, shown.methods
    assert _marks(tmp_path) == ["ran 4"]
    assert _requests(tmp_path) == [("done", "approved")]


async def test_a_2025_client_over_stdio_is_sent_the_card_while_the_call_waits(
        tmp_path: Path, tools: str) -> None:
    """``serve --stdio`` launched by its client, as a desktop client does (its page on
    loopback): a client that declared URL elicitation is shown the card as over HTTP."""
    launch = StdioServerParameters(command=sys.executable, args=[
        "-m", "toolkeeper.cli", "serve", "--stdio", tools, "--no-builtins",
        "--state-dir", str(tmp_path / "state"), "--approval-wait", "50"],
        env={**os.environ, "TOOLKEEPER_TOKEN": TOKEN}, cwd=str(tmp_path))
    shown = Shown()
    person = _decide_when_shown(None, shown, "approve")
    with (tmp_path / "server.log").open("w") as errlog:
        async with _client(None, shown, mode="legacy",
                           transport=stdio_client(launch, errlog=errlog)) as client:
            assert client.session.protocol_version == "2025-11-25"
            result = await client.call_tool("launch", {"n": 5})
            end = time.monotonic() + 30  # the notification may trail the result
            while "notifications/elicitation/complete" not in shown.methods and \
                    time.monotonic() < end:
                await anyio.sleep(0.05)
    person.join(timeout=10)
    assert shown.asked, (tmp_path / "server.log").read_text()
    link = shown.asked[0].url  # type: ignore[union-attr]
    assert link.startswith("http://127.0.0.1:") and "/approvals/apr_" in link, link
    assert "'launch' (risk critical)" in shown.asked[0].message
    assert not result.is_error and "launched 5" in _text(result), result
    assert "notifications/elicitation/complete" in shown.methods, shown.methods
    assert _marks(tmp_path) == ["ran 5"]
    assert _requests(tmp_path) == [("done", "approved")]
