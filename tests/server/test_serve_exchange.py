"""``toolkeeper serve`` answering 2025-era clients (the official client in ``legacy`` mode,
and plain HTTP posts): one JSON body per call, an event stream when the call sends progress
first, errors and refusals as before, and a call whose client hangs up is cancelled."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from ..blocks import text_of
from .test_serve import CLIENT_TOKENS, _start

pytestmark = pytest.mark.anyio

TOOLS = '''
import anyio

from toolkeeper import HitlMode, ToolContext, ToolRisk, tool


@tool
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@tool
async def crunch(steps: int, ctx: ToolContext) -> str:
    """Crunch numbers, reporting progress."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
    return f"crunched {steps}"


@tool
async def linger(seconds: float) -> str:
    """Wait, then answer."""
    await anyio.sleep(seconds)
    return "lingered"


@tool(risk=ToolRisk.CRITICAL, hitl_mode=HitlMode.BLOCKING)
def launch(target: str) -> str:
    """Launch something (a person approves first)."""
    return f"launched {target}"
'''
HEADERS = {"Accept": "application/json, text/event-stream",
           "MCP-Protocol-Version": "2025-11-25"}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    module = tmp_path / "things.py"
    module.write_text(TOOLS)
    proc, url = _start(tmp_path, "--approval-wait", "2", tools=str(module))
    yield url, proc
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=20)


def _legacy(url: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {CLIENT_TOKENS[url]}"},
                              timeout=60)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http), mode="legacy")


def _post(url: str, body: dict[str, object], **headers: str) -> httpx.Response:
    return httpx.post(f"{url}/mcp", json=body, timeout=30, headers={
        **HEADERS, "Authorization": f"Bearer {CLIENT_TOKENS[url]}", **headers})


async def test_a_2025_client_lists_calls_and_reads_errors_as_before(
        served: tuple[str, subprocess.Popen[str]]) -> None:
    url, _ = served
    async with _legacy(url) as client:
        assert client.protocol_version == "2025-11-25"
        names = [t.name for t in (await client.list_tools()).tools]
        right = await client.call_tool("add", {"a": 2, "b": 40})
        invalid = await client.call_tool("add", {"a": "two"})
        unknown = await client.call_tool("nothing_here", {})
    assert names == ["add", "crunch", "launch", "linger"]
    assert right.structured_content == {"result": 42} and not right.is_error
    assert invalid.is_error and "'a'" in text_of(invalid.content[0])
    assert unknown.is_error and "nothing_here" in text_of(unknown.content[0])


async def test_progress_turns_the_answer_into_an_event_stream(
        served: tuple[str, subprocess.Popen[str]]) -> None:
    url, _ = served
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with _legacy(url) as client:
        done = await client.call_tool("crunch", {"steps": 3}, progress_callback=on_progress)
        quiet = await client.call_tool("crunch", {"steps": 2})
    assert text_of(done.content[0]) == "crunched 3"
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert text_of(quiet.content[0]) == "crunched 2"


def test_one_json_body_without_notifications_an_event_stream_with_them(
        served: tuple[str, subprocess.Popen[str]]) -> None:
    url, _ = served
    call: dict[str, Any] = {"jsonrpc": "2.0", "id": "c1", "method": "tools/call",
                            "params": {"name": "crunch", "arguments": {"steps": 2}}}
    plain = _post(url, call)
    assert plain.headers["content-type"] == "application/json"
    assert plain.json()["result"]["content"][0]["text"] == "crunched 2"
    call["params"]["_meta"] = {"progressToken": "p1"}
    streamed = _post(url, call)
    assert streamed.headers["content-type"].startswith("text/event-stream")
    events = [line.removeprefix("data: ") for line in streamed.text.splitlines()
              if line.startswith("data: ")]
    assert len(events) == 3  # two progress notifications, then the result
    assert '"progressToken":"p1"' in events[0] and '"progress":2' in events[1]
    assert '"id":"c1"' in events[2] and "crunched 2" in events[2]


def test_a_call_waiting_for_approval_tells_its_progress_then_answers_pending(
        served: tuple[str, subprocess.Popen[str]]) -> None:
    url, _ = served
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "launch", "arguments": {"target": "probe"}, "_meta": {"progressToken": 1}}}
    answer = _post(url, call)
    events = [line for line in answer.text.splitlines() if line.startswith("data: ")]
    assert answer.headers["content-type"].startswith("text/event-stream")
    assert any("notifications/progress" in e and "approval" in e for e in events[:-1])
    assert '"id":7' in events[-1] and "waiting for approval" in events[-1]


def test_protocol_errors_and_refusals_are_unchanged(
        served: tuple[str, subprocess.Popen[str]]) -> None:
    url, _ = served
    bad_params = _post(url, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                             "params": {"arguments": {}}})
    assert bad_params.status_code == 200 and bad_params.json()["error"]["code"] == -32602
    assert _post(url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                 Accept="application/json").status_code == 406
    assert _post(url, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
                 Host="evil.example").status_code == 421
    assert _post(url, {"jsonrpc": "2.0", "id": 4, "method": "tools/list"},
                 Origin="http://evil.example").status_code == 403
    too_big = {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
               "params": {"name": "add", "arguments": {"a": 1, "b": 2, "pad": "x" * (9 << 20)}}}
    assert _post(url, too_big).status_code == 413
    other = _post(url, {"jsonrpc": "2.0", "id": 6, "method": "nothing/here"})
    assert other.status_code == 200 and "-32601" in other.text  # the SDK's path answers it
    ping = _post(url, {"jsonrpc": "2.0", "id": 8, "method": "ping"})
    assert ping.status_code == 200 and '"id":8' in ping.text


async def test_a_client_that_hangs_up_cancels_its_call(
        served: tuple[str, subprocess.Popen[str]], tmp_path: Path) -> None:
    url, _ = served
    async with _legacy(url) as client:
        with anyio.move_on_after(1):
            await client.call_tool("linger", {"seconds": 30})
    database = tmp_path / "state" / "toolkeeper.db"
    rows: list[tuple[str, str | None]] = []
    with anyio.fail_after(10):
        while not rows:
            with sqlite3.connect(database) as db:
                rows = db.execute("SELECT status, error_code FROM audit WHERE tool = "
                                  "'linger'").fetchall()
            await anyio.sleep(0.1)
    assert rows == [("error", "cancelled")]


def test_input_schemas_follow_the_catalog() -> None:
    from toolkeeper import tool
    from toolkeeper.server.exchange import input_schemas
    from toolkeeper.toolbox import Toolbox

    @tool
    def first(a: int) -> int:
        """One."""
        return a

    @tool
    def second(text: str) -> str:
        """Two."""
        return text

    box = Toolbox([first])
    lookup = input_schemas(box)
    schema = lookup("first")
    assert schema is not None and list(schema["properties"]) == ["a"]
    assert lookup("second") is None
    box.add(second)
    later = lookup("second")
    assert later is not None and list(later["properties"]) == ["text"]
    box.remove("first")
    assert lookup("first") is None  # the catalog changed: exported again


async def test_the_lean_path_refuses_exactly_the_posts_the_sdk_transport_check_refuses(
        ) -> None:
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.requests import Request

    from toolkeeper.server.exchange import SingleExchange

    settings = TransportSecuritySettings(
        allowed_hosts=["127.0.0.1:8765", "localhost:*"],
        allowed_origins=["http://127.0.0.1:8765", "http://localhost:*"])
    kinds = [None, b"application/json", b"Application/JSON; charset=utf-8", b"text/plain"]
    hosts = [None, b"127.0.0.1:8765", b"localhost:9", b"localhost", b"evil.example"]
    origins = [None, b"", b"http://localhost:1", b"http://127.0.0.1:8765", b"http://evil"]
    for protect in (True, False):
        settings.enable_dns_rebinding_protection = protect
        lean = SingleExchange(None, type("S", (), {"middleware": []})(), security=settings,
                              max_body_bytes=1 << 20)
        for kind in kinds:
            for host in hosts:
                for origin in origins:
                    headers = [(name, value) for name, value in (
                        (b"content-type", kind), (b"host", host), (b"origin", origin))
                        if value is not None]
                    headers += [(b"host", b"evil.example")]  # a second Host: the first counts
                    scope = {"type": "http", "method": "POST", "path": "/mcp",
                             "headers": headers}
                    sdk = await lean.security.validate_request(Request(scope), is_post=True)
                    assert lean._secure(headers) is (sdk is None), (protect, headers)
