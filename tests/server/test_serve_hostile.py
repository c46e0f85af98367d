"""``toolkeeper serve`` under a hostile upstream and a flooding client: real server processes,
an upstream written with the MCP SDK alone, the official MCP client.

- An upstream whose listing stalls holds only its own tools: local tools are listed and called
  at once (over HTTP and stdio), the upstream's join when its listing ends and stdio clients are
  told (``notifications/tools/list_changed``); a later, stale listing that stalls holds no
  client's ``tools/list`` either.
- A client that floods refused calls past ``[security] max_audit_rows`` has the rest counted in
  one summary row naming the bound, not stored one by one."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from .test_serve import CLIENT_TOKENS, TOKEN, _client, _start
from .test_serve_gateway import _until_listed

pytestmark = pytest.mark.anyio
UPSTREAM = str(Path(__file__).resolve().parents[1] / "gateway" / "upstream_server.py")


def _config(tmp_path: Path, extra: str = "", mcp: str = "") -> Path:
    config = tmp_path / "toolkeeper.toml"
    config.write_text(
        f"{extra}[mcp]\nenabled = true\n{mcp}[[mcp.servers]]\nname = \"up\"\n"
        "sandbox = false\n"  # a test server of ours, with the test's own folder
        f"command = {json.dumps(sys.executable)}\nargs = {json.dumps([UPSTREAM, str(tmp_path)])}\n"
        "connect_timeout_s = 30\nrisk = \"safe\"\n")
    return config


async def test_serve_answers_local_tools_while_an_upstream_stalls_its_listing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLKEEPER_TOKEN", TOKEN)
    (tmp_path / "stall").write_text("20")  # answers tools/list after 20 s, or when released
    proc, url = _start(tmp_path, "--config", str(_config(tmp_path)))
    try:
        async with _client(url) as client:
            first = {t.name for t in (await client.list_tools()).tools}
            forecast = await client.call_tool("get_forecast", {"city": "Lisbon"})
            stalled = not (tmp_path / "listed").exists()  # the upstream has not answered yet
            (tmp_path / "release").write_text("go")
            later = await _until_listed(client, "up-echo")
            echoed = await client.call_tool("up-echo", {"text": "hi"})
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    assert stalled, "serve waited for the upstream's listing before serving its local tools"
    assert {"get_forecast", "broadcast_alert"} <= first
    assert not any(n.startswith("up-") for n in first)
    assert not forecast.is_error and "Lisbon" in forecast.content[0].text  # type: ignore[union-attr]
    assert {"up-echo", "up-add", "get_forecast"} <= later
    assert echoed.content[0].text == "hi"  # type: ignore[union-attr]
    assert proc.stderr is not None
    said = proc.stderr.read()
    assert "local tools are served meanwhile" in said and "listed:" in said, said


async def test_a_stale_listing_of_a_stalled_upstream_holds_no_clients_tools_list(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLKEEPER_TOKEN", TOKEN)
    proc, url = _start(tmp_path, "--config", str(_config(tmp_path, mcp="refresh_s = 0.2\n")))
    try:
        async with _client(url) as client:
            await _until_listed(client, "up-echo")
            (tmp_path / "stall").write_text("20")  # its next listing stalls
            await anyio.sleep(0.5)  # older than refresh_s: a tools/list lists it again
            names = {t.name for t in (await client.list_tools()).tools}
            forecast = await client.call_tool("get_forecast", {"city": "Braga"})
            stalled = not (tmp_path / "listed").exists()
            (tmp_path / "release").write_text("go")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    assert stalled, "a client's tools/list waited for the upstream's stalled listing"
    assert {"up-echo", "get_forecast"} <= names  # what was listed before is still served
    assert not forecast.is_error


def _stdio(tmp_path: Path) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[
        "-m", "toolkeeper.cli", "serve", "--stdio", "--no-builtins", str(_weather()),
        "--config", str(_config(tmp_path)), "--state-dir", str(tmp_path / "state")],
        env={**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}, cwd=str(tmp_path))


def _weather() -> Path:
    return Path(__file__).resolve().parents[2] / "examples" / "weather.py"


async def test_serve_stdio_tells_its_client_when_a_stalled_upstreams_tools_arrive(
        tmp_path: Path) -> None:
    (tmp_path / "stall").write_text("20")
    told = anyio.Event()

    async def heard(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            told.set()

    with (tmp_path / "serve.log").open("w") as errlog:
        async with Client(stdio_client(_stdio(tmp_path), errlog=errlog), mode="legacy",
                          message_handler=heard) as client:
            first = {t.name for t in (await client.list_tools()).tools}
            forecast = await client.call_tool("get_forecast", {"city": "Porto"})
            stalled = not (tmp_path / "listed").exists()
            (tmp_path / "release").write_text("go")
            with anyio.fail_after(30):
                await told.wait()
            later = {t.name for t in (await client.list_tools()).tools}
    assert stalled, "serve --stdio waited for the upstream's listing before serving"
    assert "get_forecast" in first and not any(n.startswith("up-") for n in first)
    assert not forecast.is_error
    assert {"up-echo", "up-add"} <= later


async def test_a_call_to_an_upstream_tool_made_while_it_is_listed_waits_for_the_listing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLKEEPER_TOKEN", TOKEN)
    (tmp_path / "stall").write_text("20")
    proc, url = _start(tmp_path, "--config", str(_config(tmp_path)))
    try:
        async with _client(url) as client, anyio.create_task_group() as group:
            answers: list[Any] = []

            async def call() -> None:
                answers.append(await client.call_tool("up-add", {"a": 2, "b": 3}))

            group.start_soon(call)
            await anyio.sleep(0.5)
            waiting = not answers  # the call waits for the upstream's listing...
            (tmp_path / "release").write_text("go")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    assert waiting
    assert answers and answers[0].structured_content == {"sum": 5}  # ...then runs


async def test_a_client_flooding_refused_calls_past_max_audit_rows_gets_one_summary_row(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLKEEPER_TOKEN", TOKEN)
    config = tmp_path / "toolkeeper.toml"
    config.write_text("[security]\nmax_audit_rows = 5\n")
    proc, url = _start(tmp_path, "--config", str(config))
    try:
        async with _client(url) as client:
            refused = [await client.call_tool("get_forecast", {"days": n}) for n in range(20)]
            ran = await client.call_tool("get_forecast", {"city": "Faro"})
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    assert all(r.is_error for r in refused) and not ran.is_error
    with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
        rows = list(db.execute("SELECT tool, status, error_code, arguments FROM audit "
                               "ORDER BY seq"))
    stored = [r for r in rows if r[0] == "get_forecast"]
    # five rows, then the refusals counted; the call that ran is stored all the same
    assert [r[1] for r in stored] == ["error"] * 5 + ["ok"]
    (summary,) = [r for r in rows if r[0] != "get_forecast"]
    assert summary[1:3] == ("dropped", "audit_bound")
    said = json.loads(summary[3])
    assert said["bound"] == "max_audit_rows" and said["limit"] == 5 and said["dropped"] == 15


async def test_a_lone_surrogate_in_a_tools_name_or_a_requests_id_is_answered_and_audited(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # JSON's \\udXXX escapes carry a lone surrogate, which UTF-8 cannot: the audit row of such
    # a call failed to write on the event loop, and the call's answer waited for it forever
    monkeypatch.setenv("TOOLKEEPER_TOKEN", TOKEN)
    proc, url = _start(tmp_path)
    headers = {"Authorization": f"Bearer {CLIENT_TOKENS[url]}", "Content-Type":
               "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-11-25"}
    bodies = [
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_forecast\\ud800",'
        b'"arguments":{"city":"Faro"}}}',
        b'{"jsonrpc":"2.0","id":"r\\udc01","method":"tools/call","params":{"name":'
        b'"get_forecast","arguments":{"city":"Faro"}}}',
        b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_forecast",'
        b'"arguments":{"city":"Fa\\ud800ro"}}}',
        b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"get_forecast",'
        b'"arguments":{"city":"Faro"}}}']
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            answers = [(await http.post(f"{url}/mcp", content=body, headers=headers))
                       for body in bodies]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    texts = [a.text for a in answers]
    assert [a.status_code for a in answers] == [200] * 4, texts
    assert "Unknown tool" in texts[0] or "unknown tool" in texts[0].lower(), texts[0]
    assert "Faro" in texts[1] and "Faro" in texts[3], texts
    assert "cannot be recorded in the audit log" in texts[2], texts[2]
    assert proc.stderr is not None
    said = proc.stderr.read()
    assert "Traceback" not in said, said
    with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
        rows = list(db.execute("SELECT tool, status, error_code FROM audit ORDER BY seq"))
    assert rows[0][0] == "get_forecast\\ud800" and rows[0][1] in ("error", "denied"), rows
    assert [r[1:] for r in rows[1:]] == [("ok", None), ("error", "invalid_arguments"),
                                         ("ok", None)], rows


def test_a_sessions_client_cannot_grow_its_session_id_or_a_body_past_the_caps_nor_crash_a_parse(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # with --sessions the body was read whole with no cap (40 MiB ran the tool), the id sealed
    # the whole initialize (1 MiB of it made a 1.4 MB header), and a body nested 1,000 deep
    # ended in a RecursionError traceback and a 500
    monkeypatch.setenv("TOOLKEEPER_TOKEN", TOKEN)
    proc, url = _start(tmp_path, "--sessions")
    headers = {"Authorization": f"Bearer {CLIENT_TOKENS[url]}", "Content-Type":
               "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-11-25"}

    def initialize(http: httpx.Client, **params: Any) -> httpx.Response:
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "probe", "version": "1"}, **params}}
        return http.post(f"{url}/mcp", json=body, headers=headers)

    try:
        with httpx.Client(timeout=60) as http:
            big = "x" * (1 << 20)
            padded = initialize(http, x=big, clientInfo={
                "name": "probe", "version": "1", "description": big},
                capabilities={"experimental": {"pad": {"v": big}}})
            too_long = initialize(http, clientInfo={"name": "n" * 10_000, "version": "1"})
            session = padded.headers.get("mcp-session-id", "")
            sessioned = {**headers, "Mcp-Session-Id": session}
            http.post(f"{url}/mcp", headers=sessioned, json={
                "jsonrpc": "2.0", "method": "notifications/initialized"})
            listed = http.post(f"{url}/mcp", headers=sessioned, json={
                "jsonrpc": "2.0", "id": 2, "method": "tools/list"})
            huge = http.post(f"{url}/mcp", headers=sessioned, content=(
                b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":'
                b'"get_forecast","arguments":{"city":"' + b"F" * (9 << 20) + b'"}}}'))
            deep = http.post(f"{url}/mcp", headers=sessioned, content=(
                b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":'
                b'"get_forecast","arguments":{"city":' + b"[" * 1000 + b"]" * 1000 + b"}}}"))
            after = http.post(f"{url}/mcp", headers=sessioned, json={
                "jsonrpc": "2.0", "id": 5, "method": "tools/list"})
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    assert padded.status_code == 200 and 0 < len(session) < 8192, (padded.status_code,
                                                                   len(session))
    assert listed.status_code == 200 and "get_forecast" in listed.text, listed.text[:300]
    assert too_long.status_code == 400 and "clientInfo" in too_long.text, too_long.text[:300]
    assert "mcp-session-id" not in too_long.headers
    assert huge.status_code == 413, huge.text[:300]
    assert deep.status_code == 400, deep.text[:300]
    assert after.status_code == 200 and "get_forecast" in after.text
    assert proc.stderr is not None
    said = proc.stderr.read()
    assert "Traceback" not in said and "RecursionError" not in said, said[-3000:]
    assert not (tmp_path / "state" / "toolkeeper.db").exists() or all(
        r[0] != "get_forecast" for r in sqlite3.connect(tmp_path / "state" / "toolkeeper.db")
        .execute("SELECT tool FROM audit"))  # neither the huge nor the deep call ran
