"""``[approval] channels = ["page", "client"]``: the person at the MCP client is asked with a
form (a 2026-07-28 ``input_required`` result) through the official client, the first decision
from any channel wins, and the channel is on record. Off by default."""

from __future__ import annotations

import signal
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from .test_serve import CLIENT_TOKENS, TOKEN, _start

pytestmark = pytest.mark.anyio

ALERT = {"alert": {"region": "PT-11", "level": "red", "message": "Storm"}}


def _asking_client(url: str, answer: Any, asked: list[str]) -> Client:
    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        answered: types.ElicitResult = await answer(params)
        return answered

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {CLIENT_TOKENS[url]}"},
                              timeout=60)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http),
                  elicitation_callback=elicit)


async def _call_asking(proc: Any, url: str, answer: Any, asked: list[str]) -> Any:
    """The risky call from a client that answers forms with ``answer``; then stop the server."""
    try:
        async with _asking_client(url, answer, asked) as client:
            return await client.call_tool("broadcast_alert", ALERT)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)


def _config(tmp_path: Path, channels: str) -> str:
    config = tmp_path / "toolkeeper.toml"
    config.write_text(f"[approval]\nchannels = {channels}\n")
    return str(config)


def _decisions(tmp_path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
        rows = db.execute("SELECT state, decision FROM approvals").fetchall()
    return [(state, types_json(decision)) for state, decision in rows]


def types_json(decision: str | None) -> str:
    import json

    return json.loads(decision)["approver"] if decision else ""


@pytest.mark.parametrize(("choice", "ran"), [("approve", True), ("deny", False)])
async def test_the_person_at_the_client_decides_with_a_form_and_the_channel_is_recorded(
        tmp_path: Path, choice: str, ran: bool) -> None:
    proc, url = _start(tmp_path, "--config", _config(tmp_path, '["page", "client"]'),
                       "--approval-wait", "20")
    asked: list[str] = []

    async def answer(_params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"decision": choice})

    result = await _call_asking(proc, url, answer, asked)
    assert len(asked) == 1 and "'broadcast_alert' (risk critical)" in asked[0]
    assert "PT-11" in asked[0] and "/approvals/apr_" in asked[0]
    assert result.is_error is not ran, result
    text = result.content[0].text
    assert ("PT-11" in text) if ran else ("denied at the client" in text)
    assert _decisions(tmp_path) == [("done" if ran else "denied", "client:default")]
    # the first pass stopped waiting to ask (pending, not cancelled); the retry is the outcome
    assert _audited(tmp_path) == [("pending", "pending"), ("ok", None) if ran else
                                  ("denied", "denied")]


def _audited(tmp_path: Path) -> list[tuple[str, str | None]]:
    with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
        return [(status, code) for status, code in
                db.execute("SELECT status, error_code FROM audit ORDER BY rowid").fetchall()]


async def test_a_decision_on_the_page_first_wins_over_the_clients_answer(
        tmp_path: Path) -> None:
    proc, url = _start(tmp_path, "--config", _config(tmp_path, '["page", "client"]'))
    asked: list[str] = []

    async def answer(_params: Any) -> types.ElicitResult:
        request_id = asked[0].split("(request ")[1].split(")")[0]
        denied = httpx.post(f"{url}/api/approvals/{request_id}/decision", timeout=10,
                            json={"decision": "deny", "message": "not now"},
                            headers={"Authorization": f"Bearer {TOKEN}"})
        assert denied.status_code == 200  # the operator, while the form is open
        return types.ElicitResult(action="accept", content={"decision": "approve"})

    result = await _call_asking(proc, url, answer, asked)
    assert result.is_error and "not now" in result.content[0].text
    assert _decisions(tmp_path) == [("denied", "operator:operator")]


async def test_by_default_only_the_page_decides_and_the_client_is_only_shown_the_card(
        tmp_path: Path) -> None:
    proc, url = _start(tmp_path)
    asked: list[str] = []
    modes: list[str] = []

    async def answer(params: Any) -> types.ElicitResult:
        modes.append(params.mode)  # a link to the card, never the form
        return types.ElicitResult(action="accept", content={"decision": "approve"})

    result = await _call_asking(proc, url, answer, asked)
    assert modes == ["url"] and "Open the approval card" in asked[0], asked
    assert result.is_error  # the client's answer decided nothing
    assert "waiting for approval" in result.content[0].text
    assert _decisions(tmp_path) == [("pending", "")]


def test_a_config_without_the_page_channel_is_refused(tmp_path: Path) -> None:
    from toolkeeper.config import load_config
    from toolkeeper.errors import ConfigError

    with pytest.raises(ConfigError, match=r"approval\.channels"):
        load_config(_config(tmp_path, '["client"]'))


@pytest.mark.parametrize("channels", ['["page", "client"]', '["page"]'])
def test_serve_says_at_start_when_a_client_may_approve_its_own_calls(
        tmp_path: Path, channels: str) -> None:
    proc, _url = _start(tmp_path, "--config", _config(tmp_path, channels))
    proc.send_signal(signal.SIGTERM)
    assert proc.stdout is not None
    out = proc.stdout.read()  # through the reader's buffer, which may hold the start lines
    proc.wait(timeout=20)
    said = [line for line in out.splitlines() if line.startswith("approval channels")]
    if channels == '["page"]':
        assert said == []
        return
    (line,) = said
    assert "an MCP client is asked to approve its own calls too" in line
    assert "whoever answers its form decides" in line and "[approval] channels" in line
