"""A plain 2026-07-28 ``tools/call`` answered in one pass says exactly what the SDK's entry says.

Two real ``toolkeeper serve`` processes over the same tools: one as shipped (its one-pass path
counted), one with the one-pass path switched off (every 2026-07-28 call through the SDK's own
entry and kernel). Both run with a short keep-alive interval, so that a silent call's answer
becomes an event stream within the test. The same requests — plain calls, a tool error, an
unknown tool, bad arguments, a call a person must approve, one that asks the client for input,
header errors, other params — get the same status, headers and body from both, byte for byte
once the date, generated ids, timestamps, keep-alive comments, each server's address and its
sealed ``requestState`` are set aside; and the one-pass path is taken exactly for the plain
calls."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp_types import CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY

from ..processes import no_traceback
from .test_fastpath import _IDS, _TIMES
from .test_fastpath import TOOLS as PLAIN_TOOLS
from .test_serve import CLIENT_TOKENS, _started

TOOLS = "import anyio\n" + PLAIN_TOOLS + '''

@tool
async def linger(seconds: float) -> str:
    """Wait, then answer."""
    await anyio.sleep(seconds)
    return "lingered"
'''
WINDOW = "2"
"""Seconds a silent call's answer waits before it becomes an event stream (15 as shipped)."""
_SHORT_WINDOW = ("from mcp.server import _streamable_http_modern as sdk\n"
                 "from toolkeeper.server import modern\n"
                 f"sdk._SSE_PING_INTERVAL = modern.PING_S = {WINDOW}\n")
_RUN = "runpy.run_module('toolkeeper.cli', run_name='__main__', alter_sys=True)\n"
COUNTED = ("import os, runpy\n" + _SHORT_WINDOW +
           "serve = modern.ModernCall.serve\n"
           "async def counted(*args, **kwargs):\n"
           "    with open(os.environ['ONE_PASS_COUNT'], 'a') as count:\n"
           "        count.write('.')\n"
           "    await serve(*args, **kwargs)\n"
           "modern.ModernCall.serve = counted\n" + _RUN)
"""``toolkeeper serve`` as shipped, each call its one-pass path serves counted in a file."""
SDK_ONLY = ("import runpy\n" + _SHORT_WINDOW +
            "from toolkeeper.server import fastpath\n"
            "fastpath.FastCall.takes = lambda *args: False\n" + _RUN)
"""``toolkeeper serve`` with the one-pass path switched off."""
VERSION = "2026-07-28"
_STATE = re.compile(rb'"requestState":"[^"]+"')
_PING = b": ping\r\n\r\n"


def _serve(tmp_path: Path, name: str, program: str) -> tuple[subprocess.Popen[str], str]:
    where = tmp_path / name
    where.mkdir()
    tools = where / "tools.py"
    tools.write_text(TOOLS)
    env = {k: v for k, v in os.environ.items() if k != "TOOLKEEPER_TOKEN"}
    env["ONE_PASS_COUNT"] = str(where / "count")
    proc = subprocess.Popen(
        [sys.executable, "-c", program, "serve", str(tools), "--no-builtins", "--port", "0",
         "--state-dir", str(where / "state"), "--approval-wait", "0", "--rate-limit", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=where)
    return proc, _started(proc, where / "state")


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    tmp_path = tmp_path_factory.mktemp("modern")
    fast, fast_url = _serve(tmp_path, "fast", COUNTED)
    sdk, sdk_url = _serve(tmp_path, "sdk", SDK_ONLY)
    yield fast_url, sdk_url, tmp_path / "fast"
    for proc in (fast, sdk):
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) in (0, 130)
        no_traceback(proc)


def _call(name: object, arguments: object = None, ident: object = "r1",
          capabilities: dict[str, Any] | None = None, meta: dict[str, Any] | None = None,
          **more: Any) -> bytes:
    envelope = {PROTOCOL_VERSION_META_KEY: VERSION, CLIENT_INFO_META_KEY: {
        "name": "probe", "version": "1.0"}, CLIENT_CAPABILITIES_META_KEY: capabilities or {}}
    params: dict[str, Any] = {"name": name, "_meta": {**envelope, **(meta or {})}, **more}
    if arguments is not None:
        params["arguments"] = arguments
    return json.dumps({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}
                      ).encode()


def _bare(name: str) -> bytes:
    """A call without the envelope's client info (which the wire makes optional)."""
    return json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": name, "arguments": {"a": 1, "b": 2}, "_meta": {
            PROTOCOL_VERSION_META_KEY: VERSION, CLIENT_CAPABILITIES_META_KEY: {}}}}).encode()


URL_ELICITATION: dict[str, Any] = {"elicitation": {"url": {}}}
"""A client that can show a person a link: a call a person must approve asks it for input."""
ONE_PASS = True
REQUESTS: dict[str, tuple[bytes, dict[str, str], bool]] = {
    "a plain call": (_call("add", {"a": 2, "b": 40}), {}, ONE_PASS),
    "a numeric id": (_call("add", {"a": 1, "b": 1}, ident=7), {}, ONE_PASS),
    "no client info": (_bare("add"), {}, ONE_PASS),
    "structured content": (_call("describe", {"city": "Lisbon", "days": 3}), {}, ONE_PASS),
    "no arguments": (_call("describe"), {}, ONE_PASS),
    "unicode": (_call("shout", {"text": "ação ☂ \u2028"}), {}, ONE_PASS),
    "invalid arguments": (_call("add", {"a": "two"}), {}, ONE_PASS),
    "an unknown tool": (_call("nothing_here", {}), {}, ONE_PASS),
    "a tool that raises": (_call("broken", {"n": 3}), {}, ONE_PASS),
    "a call a person must approve": (_call("launch", {"target": "moon"}), {}, ONE_PASS),
    "a call that asks the client for input": (
        _call("launch", {"target": "mars"}, capabilities=URL_ELICITATION), {}, ONE_PASS),
    "a silent call: an event stream": (_call("linger", {"seconds": 5}), {}, ONE_PASS),
    "accept with wildcards": (_call("add", {"a": 1, "b": 2}), {"Accept": "*/*"}, False),
    "a progress token": (_call("add", {"a": 1, "b": 2}, meta={"progressToken": "p"}), {}, False),
    "a task": (_call("add", {"a": 1, "b": 2}, task={"ttl": 1000}), {}, False),
    "a requestState": (_call("add", {"a": 1, "b": 2}, requestState="forged"), {}, False),
    "an unknown params key": (_call("add", {"a": 1, "b": 2}, extra=True), {}, False),
    "a name that is not a string": (_call(42, {}), {"Mcp-Name": "42"}, False),
    "arguments that are not an object": (_call("add", [1, 2]), {}, False),
    "no envelope": (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "add", "arguments": {"a": 1, "b": 2}}}).encode(), {}, False),
    "a version header naming another revision": (
        _call("add", {"a": 1, "b": 2}), {"MCP-Protocol-Version": "2099-01-01"}, False),
    "a 2025 version header": (
        _call("add", {"a": 1, "b": 2}), {"MCP-Protocol-Version": "2025-11-25"}, False),
    "no version header": (_call("add", {"a": 1, "b": 2}), {"MCP-Protocol-Version": ""}, False),
    "an Mcp-Name naming another tool": (_call("add", {"a": 1, "b": 2}), {"Mcp-Name": "shout"},
                                        False),
    "no Mcp-Name": (_call("add", {"a": 1, "b": 2}), {"Mcp-Name": ""}, False),
    "no Mcp-Method": (_call("add", {"a": 1, "b": 2}), {"Mcp-Method": ""}, False),
    "an Mcp-Param header no tool declares": (_call("add", {"a": 1, "b": 2}), {"Mcp-Param-A": "1"},
                                              ONE_PASS),
    "accepting only JSON": (_call("add", {"a": 1, "b": 2}), {"Accept": "application/json"},
                            False),
    "accepting only an event stream": (_call("add", {"a": 1, "b": 2}),
                                       {"Accept": "text/event-stream"}, False),
    "a wrong content type": (_call("add", {"a": 1, "b": 2}), {"Content-Type": "text/plain"},
                             False),
    "not JSON": (b'{"jsonrpc": "2.0", "id": 4, "meth', {}, False),
    # JSON's \\udXXX escapes carry a lone surrogate, which UTF-8 cannot
    "a lone surrogate in the arguments": (_call("shout", {"text": "a\ud800"}), {}, ONE_PASS),
    "a lone surrogate in the id": (_call("add", {"a": 1, "b": 2}, ident="r\udc01"), {},
                                   ONE_PASS),
}


def _headers(body: bytes, headers: dict[str, str], token: str) -> dict[str, str]:
    try:
        name = json.loads(body)["params"]["name"]
    except (ValueError, KeyError, TypeError):
        name = None
    sent = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
            "MCP-Protocol-Version": VERSION, "Mcp-Method": "tools/call",
            "Mcp-Name": name if isinstance(name, str) else "", **headers,
            "Authorization": f"Bearer {token}"}
    return {k: v for k, v in sent.items() if v}


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, list[tuple[str, str]], bytes]:
    answer = httpx.post(f"{url}/mcp", content=body, headers=_headers(
        body, headers, CLIENT_TOKENS[url]), timeout=30)
    kept = [(k, v) for k, v in answer.headers.multi_items() if k not in ("date", "content-length")]
    body = answer.content.replace(url.encode(), b"URL").replace(_PING, b"")
    return answer.status_code, kept, _STATE.sub(b'"requestState":"SEALED"', _TIMES.sub(
        b"TIME", _IDS.sub(rb"\1_ID", body)))


def _count(where: Path) -> int:
    count = where / "count"
    return len(count.read_text()) if count.exists() else 0


@pytest.mark.parametrize("case", REQUESTS)
def test_a_2026_call_in_one_pass_answers_byte_for_byte_what_the_sdk_entry_answers(
        both: tuple[str, str, Path], case: str) -> None:
    fast_url, sdk_url, fast_dir = both
    body, headers, one_pass = REQUESTS[case]
    before = _count(fast_dir)
    fast = _post(fast_url, body, headers)
    assert _count(fast_dir) - before == (1 if one_pass else 0), f"one-pass path taken: {case}"
    sdk = _post(sdk_url, body, headers)
    assert fast == sdk
    if case == "a plain call":
        assert fast[0] == 200 and b'"structuredContent":{"result":42}' in fast[2]
        assert ("content-type", "application/json") in fast[1]
    if case == "a silent call: an event stream":
        assert ("content-type", "text/event-stream") in fast[1] and b"lingered" in fast[2]
    if case == "a call that asks the client for input":
        assert b'"resultType":"input_required"' in fast[2] and b"SEALED" in fast[2]


def test_the_state_an_answer_asking_for_input_carries_is_sealed_and_taken_back(
        both: tuple[str, str, Path]) -> None:
    """The ``requestState`` of an answer asking for input is sealed (not the server's
    plaintext), and the same server takes it back on the call's next round."""
    fast_url, _, _ = both
    body = _call("launch", {"target": "venus"}, capabilities=URL_ELICITATION)
    token = CLIENT_TOKENS[fast_url]
    first = httpx.post(f"{fast_url}/mcp", content=body, headers=_headers(body, {}, token),
                       timeout=30).json()["result"]
    assert first["resultType"] == "input_required", first
    state = first["requestState"]
    again = json.loads(body)
    again["params"]["requestState"] = state
    again["params"]["inputResponses"] = {}
    raw = json.dumps(again).encode()
    answer = httpx.post(f"{fast_url}/mcp", content=raw, headers=_headers(raw, {}, token),
                        timeout=30).json()
    assert "error" not in answer, answer  # a state the server did not seal is -32602
    forged = {**again, "params": {**again["params"], "requestState": state[:-4] + "AAAA"}}
    raw = json.dumps(forged).encode()
    refused = httpx.post(f"{fast_url}/mcp", content=raw, headers=_headers(raw, {}, token),
                         timeout=30).json()
    assert refused["error"]["code"] == -32602, refused


@pytest.mark.anyio
async def test_a_client_that_hangs_up_cancels_its_2026_call(both: tuple[str, str, Path]) -> None:
    fast_url, _, fast_dir = both
    body = _call("linger", {"seconds": 30}, ident="gone")
    before = _count(fast_dir)
    async with httpx.AsyncClient(timeout=30) as client:
        with anyio.fail_after(30):  # the head comes once the window has passed
            async with client.stream("POST", f"{fast_url}/mcp", content=body, headers=_headers(
                    body, {}, CLIENT_TOKENS[fast_url])) as answer:
                assert answer.headers["content-type"] == "text/event-stream"
        # the answer closed unread: the client has hung up
    assert _count(fast_dir) == before + 1
    rows: list[tuple[str, str | None]] = []
    with anyio.fail_after(10):
        while not rows:
            with sqlite3.connect(fast_dir / "state" / "toolkeeper.db") as db:
                rows = db.execute("SELECT status, error_code FROM audit WHERE tool = 'linger' "
                                  "AND arguments LIKE '%30%'").fetchall()
            await anyio.sleep(0.1)
    assert rows == [("error", "cancelled")]
