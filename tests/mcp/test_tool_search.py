"""``toolkeeper serve --tool-search`` through the real process and the official MCP client:
``tools/list`` offers the search tool and what this client loaded; a search loads what it finds
and tells the client its list changed; a tool not loaded yet is still called through the door;
each client loads its own; stateless HTTP refuses the flag in one line."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from ..blocks import text_of
from ..server.test_serve import CLIENT_TOKENS, TOKEN, _start

pytestmark = pytest.mark.anyio

TOOLS = '''
from toolkeeper import tool


@tool
def convert_currency(amount: float, source: str, target: str) -> str:
    """Convert an amount of money from one currency to another."""
    return f"{amount} {source} in {target}"


@tool
def create_issue(title: str) -> str:
    """Open an issue in the team's bug tracker."""
    return f"opened: {title}"


@tool
def translate_text(text: str, language: str) -> str:
    """Translate a text into another language."""
    return f"{language}: {text}"
'''


class _Heard:
    """How many ``tools/list_changed`` a client heard, and a bounded wait for one more."""

    def __init__(self) -> None:
        self.count = 0
        self.changed = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.count += 1
            self.changed.set()

    async def until(self, count: int, timeout_s: float = 30) -> None:
        with anyio.move_on_after(timeout_s):
            while self.count < count:
                await self.changed.wait()
                self.changed = anyio.Event()
        assert self.count >= count, f"heard {self.count} tools/list_changed, wanted {count}"


def _tools(tmp_path: Path) -> str:
    path = tmp_path / "team_tools.py"
    path.write_text(TOOLS)
    return str(path)


def _stdio(tmp_path: Path, *args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[
        "-m", "toolkeeper.cli", "serve", "--stdio", _tools(tmp_path), "--no-builtins",
        "--state-dir", str(tmp_path / "state"), *args], env=dict(os.environ), cwd=str(tmp_path))


async def _names(client: Client) -> list[str]:
    return sorted(t.name for t in (await client.list_tools()).tools)


def _found(result: types.CallToolResult) -> list[str]:
    assert not result.is_error, text_of(result.content[0])
    found = result.structured_content or json.loads(text_of(result.content[0]))
    return [str(tool["name"]) for tool in found["tools"]]


async def test_over_stdio_the_list_is_the_search_tool_and_what_a_search_loaded(
        tmp_path: Path) -> None:
    heard = _Heard()
    with (tmp_path / "serve.log").open("w") as errlog:
        async with Client(stdio_client(_stdio(tmp_path, "--tool-search"), errlog=errlog),
                          mode="legacy", message_handler=heard) as client:
            first = await _names(client)
            declared = client.server_capabilities.tools
            unloaded = await client.call_tool("create_issue", {"title": "disk full"})
            loaded = _found(await client.call_tool("tool_search",
                                                   {"query": "convert money to a currency"}))
            await heard.until(1)
            after = await _names(client)
            again = _found(await client.call_tool("tool_search", {"query": "currency"}))
            converted = await client.call_tool("convert_currency", {
                "amount": 3, "source": "EUR", "target": "USD"})
            listed = await _names(client)
    assert first == ["tool_search"]
    assert declared is not None and declared.list_changed
    # a tool not loaded yet is called like any other: loading changes the list, not the door
    assert not unloaded.is_error and text_of(unloaded.content[0]) == "opened: disk full"
    assert loaded[0] == "convert_currency"
    assert after == sorted({"tool_search", *loaded}) and "convert_currency" in after
    assert again == ["convert_currency"] and listed == after  # found again: nothing new
    assert not converted.is_error
    with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
        audited = [r[0] for r in db.execute("SELECT tool FROM audit ORDER BY seq")]
    assert audited == ["create_issue", "tool_search", "tool_search", "convert_currency"]


def _http(url: str, token: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http), mode="legacy",
                  message_handler=_Heard())


async def test_over_http_with_sessions_each_client_lists_what_it_loaded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLKEEPER_TOKEN", TOKEN)
    proc, url = _start(tmp_path, "--sessions", "--tool-search", tools=_tools(tmp_path))
    try:
        added = subprocess.run(
            [sys.executable, "-m", "toolkeeper.cli", "tokens", "add", "ci", "--state-dir",
             str(tmp_path / "state")], capture_output=True, text=True, timeout=120, check=False)
        assert added.returncode == 0, added.stderr
        async with _http(url, CLIENT_TOKENS[url]) as alice, \
                _http(url, added.stdout.strip()) as ci:
            loaded = _found(await alice.call_tool("tool_search", {"query": "translate text"}))
            alice_sees, ci_sees = await _names(alice), await _names(ci)
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) in (0, 130)
        assert proc.stderr is not None and "Traceback" not in proc.stderr.read()
    assert loaded[0] == "translate_text" and "translate_text" in alice_sees
    assert ci_sees == ["tool_search"]


async def test_a_2026_07_28_client_hears_its_list_changed_on_its_listen_stream(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLKEEPER_TOKEN", TOKEN)
    proc, url = _start(tmp_path, "--sessions", "--tool-search", tools=_tools(tmp_path))
    try:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {CLIENT_TOKENS[url]}"},
                                  timeout=60)
        async with Client(streamable_http_client(f"{url}/mcp", http_client=http),
                          mode="auto") as client:
            first = await _names(client)
            async with client.listen(tools_list_changed=True) as events:
                loaded = _found(await client.call_tool("tool_search",
                                                       {"query": "open an issue"}))
                with anyio.move_on_after(30):
                    async for event in events:
                        heard = event
                        break
            after = await _names(client)
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) in (0, 130)
        assert proc.stderr is not None and "Traceback" not in proc.stderr.read()
    assert first == ["tool_search"] and loaded[0] == "create_issue"
    assert "heard" in locals(), "no tools list change came on the listen stream"
    assert "create_issue" in after


def test_stateless_http_refuses_tool_search_in_one_line(tmp_path: Path) -> None:
    served = subprocess.run(
        [sys.executable, "-m", "toolkeeper.cli", "serve", _tools(tmp_path), "--no-builtins",
         "--port", "0", "--state-dir", str(tmp_path / "state"), "--tool-search"],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "TOOLKEEPER_TOKEN": TOKEN})
    lines = served.stderr.strip().splitlines()
    assert served.returncode != 0 and len(lines) == 1, served.stderr
    assert "--tool-search" in lines[0] and "--sessions" in lines[0]


def test_a_served_tool_named_tool_search_is_refused_in_one_line(tmp_path: Path) -> None:
    tools = tmp_path / "mine.py"
    tools.write_text("from toolkeeper import tool\n\n\n@tool\ndef tool_search(query: str) "
                     "-> str:\n    \"\"\"Search my notes.\"\"\"\n    return query\n")
    served = subprocess.run(
        [sys.executable, "-m", "toolkeeper.cli", "serve", str(tools), "--no-builtins",
         "--port", "0", "--state-dir", str(tmp_path / "state"), "--sessions", "--tool-search"],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "TOOLKEEPER_TOKEN": TOKEN})
    lines = served.stderr.strip().splitlines()
    assert served.returncode != 0 and len(lines) == 1, served.stderr
    assert "'tool_search' is already served" in lines[0] and "rename" in lines[0]
