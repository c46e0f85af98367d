"""The one-pass ``tools/call`` answers exactly what the SDK's kernel answers.

Two real ``toolkeeper serve`` processes over the same tools: one as shipped, one started with
the one-pass path switched off (every request through the SDK's ``serve_one``). The same
requests — plain calls, calls the door refuses, calls a tool fails, calls with params the SDK
refuses, other protocol versions, other methods, bodies that are not JSON-RPC — get the same
status, headers and body from both, byte for byte once the date, generated ids, timestamps
and each server's own address are set aside."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.server.lowlevel.server import Server
from mcp.server.request_state import RequestStateBoundary
from mcp_types.methods import serialize_server_result
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from toolkeeper import Toolbox, ToolInvoker, tool
from toolkeeper.server.app import create_app
from toolkeeper.server.fastpath import WATCH_AFTER_S, FastCall, LateWatch, _plain_result
from toolkeeper.server.tracecontext import WhenTraced

from ..processes import no_traceback
from .test_serve import CLIENT_TOKENS, _started

TOOLS = '''
from toolkeeper import HitlMode, ToolRisk, tool


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def describe(city: str, days: int = 1) -> dict[str, object]:
    """A forecast-like answer with structured content."""
    return {"city": city, "days": days, "sky": "clear"}


@tool
def shout(text: str) -> str:
    """Upper-case text."""
    return text.upper()


@tool
def broken(n: int) -> int:
    """Always fails."""
    raise RuntimeError(f"broken on {n}")


@tool(risk=ToolRisk.CRITICAL, hitl_mode=HitlMode.BLOCKING)
def launch(target: str) -> str:
    """Needs a person's approval."""
    return f"launched {target}"
'''
SDK_ONLY = ("import runpy; from toolkeeper.server import fastpath; "
            "fastpath.FastCall.takes = lambda *args: False; "
            "runpy.run_module('toolkeeper.cli', run_name='__main__', alter_sys=True)")
"""``toolkeeper serve`` with the one-pass path switched off: every call through the SDK's
kernel."""
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
_IDS = re.compile(rb"\b(mcp|apr|ses|task|elicit)_[A-Za-z0-9_-]{8,}")
_TIMES = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(\+00:00|Z)")


def _serve(tmp_path: Path, name: str, sdk_only: bool) -> tuple[subprocess.Popen[str], str]:
    where = tmp_path / name
    where.mkdir()
    tools = where / "tools.py"
    tools.write_text(TOOLS)
    env = {k: v for k, v in os.environ.items() if k != "TOOLKEEPER_TOKEN"}
    start = ["-c", SDK_ONLY] if sdk_only else ["-m", "toolkeeper.cli"]
    proc = subprocess.Popen(
        [sys.executable, *start, "serve", str(tools), "--no-builtins", "--port", "0",
         "--state-dir", str(where / "state"), "--approval-wait", "0", "--rate-limit", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=where)
    return proc, _started(proc, where / "state")


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    tmp_path = tmp_path_factory.mktemp("fastpath")
    fast, fast_url = _serve(tmp_path, "fast", sdk_only=False)
    sdk, sdk_url = _serve(tmp_path, "sdk", sdk_only=True)
    yield fast_url, sdk_url
    for proc in (fast, sdk):
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) in (0, 130)
        no_traceback(proc)


def _call(name: object, arguments: object = None, ident: object = "r1", **more: Any) -> bytes:
    params: dict[str, Any] = {"name": name, **more}
    if arguments is not None:
        params["arguments"] = arguments
    return json.dumps({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}
                      ).encode()


REQUESTS: dict[str, tuple[bytes, dict[str, str]]] = {
    "a plain call": (_call("add", {"a": 2, "b": 40}), {}),
    "a plain call, a numeric id": (_call("add", {"a": 1, "b": 1}, ident=7), {}),
    "structured content": (_call("describe", {"city": "Lisbon", "days": 3}), {}),
    "no arguments": (_call("describe"), {}),
    "unicode": (_call("shout", {"text": "ação ☂ \u2028"}), {}),
    "invalid arguments": (_call("add", {"a": "two"}), {}),
    "a missing argument": (_call("add", {"a": 1}), {}),
    "an unknown tool": (_call("nothing_here", {}), {}),
    "an empty name": (_call("", {}), {}),
    "a tool that raises": (_call("broken", {"n": 3}), {}),
    "a call a person must approve": (_call("launch", {"target": "moon"}), {}),
    "a name that is not a string": (_call(42, {}), {}),
    "arguments that are not an object": (_call("add", [1, 2]), {}),
    "no name": (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                            "params": {"arguments": {}}}).encode(), {}),
    "no params": (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}).encode(), {}),
    "params with _meta": (_call("add", {"a": 1, "b": 2}, _meta={"progressToken": "p"}), {}),
    "params with a task": (_call("add", {"a": 1, "b": 2}, task={"ttl": 1000}), {}),
    "an unknown params key": (_call("add", {"a": 1, "b": 2}, extra=True), {}),
    "version 2025-06-18": (_call("describe", {"city": "Porto"}), {"MCP-Protocol-Version":
                                                                    "2025-06-18"}),
    "version 2025-03-26": (_call("describe", {"city": "Porto"}), {"MCP-Protocol-Version":
                                                                    "2025-03-26"}),
    "no version header": (_call("add", {"a": 3, "b": 4}), {"MCP-Protocol-Version": ""}),
    "an unknown version": (_call("add", {"a": 3, "b": 4}), {"MCP-Protocol-Version": "1999-01-01"}),
    "tools/list": (b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}', {}),
    "an unknown method": (b'{"jsonrpc":"2.0","id":3,"method":"tools/frobnicate"}', {}),
    "not JSON": (b'{"jsonrpc": "2.0", "id": 4, "meth', {}),
    "a bool id": (_call("add", {"a": 1, "b": 2}, ident=True), {}),
    "a batch": (b"[" + _call("add", {"a": 1, "b": 2}) + b"]", {}),
    "a wrong content type": (_call("add", {"a": 1, "b": 2}), {"Content-Type": "text/plain"}),
}


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, list[tuple[str, str]], bytes]:
    sent = {**HEADERS, "MCP-Protocol-Version": "2025-11-25", **headers,
            "Authorization": f"Bearer {CLIENT_TOKENS[url]}"}
    sent = {k: v for k, v in sent.items() if v}
    answer = httpx.post(f"{url}/mcp", content=body, headers=sent, timeout=30)
    kept = [(k, v) for k, v in answer.headers.multi_items() if k not in ("date", "content-length")]
    body = answer.content.replace(url.encode(), b"URL")  # each server names its own address
    return answer.status_code, kept, _TIMES.sub(b"TIME", _IDS.sub(rb"\1_ID", body))


@pytest.mark.parametrize("case", REQUESTS)
def test_the_one_pass_path_answers_byte_for_byte_what_the_sdk_kernel_answers(
        both: tuple[str, str], case: str) -> None:
    fast_url, sdk_url = both
    body, headers = REQUESTS[case]
    fast = _post(fast_url, body, headers)
    sdk = _post(sdk_url, body, headers)
    assert fast == sdk
    if case == "a plain call":
        assert fast[0] == 200 and b'"structuredContent":{"result":42}' in fast[2]


def _server() -> Server[Any]:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    return create_app(ToolInvoker(Toolbox([add])), token="operator-token").face.server


def test_only_a_plain_call_takes_the_one_pass_path() -> None:
    fast = FastCall(_server())
    plain = {"name": "add", "arguments": {"a": 1, "b": 2}}
    envelope = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}
    assert fast.takes("tools/call", plain, "2025-11-25")
    assert fast.takes("tools/call", {"name": "add"}, "2025-06-18")
    assert fast.takes("tools/call", {**plain, "_meta": envelope}, "2026-07-28")
    assert not fast.takes("tools/call", {**plain, "_meta": {**envelope, "progressToken": 1}},
                          "2026-07-28")
    assert not fast.takes("tools/call", {**plain, "_meta": envelope}, "2025-11-25")
    assert not fast.takes("tools/call", {**plain, "requestState": "x"}, "2026-07-28")
    assert not fast.takes("tools/call", plain, "1999-01-01")
    assert not fast.takes("tools/list", {}, "2025-11-25")
    assert not fast.takes("tools/call", {**plain, "_meta": {}}, "2025-11-25")
    assert not fast.takes("tools/call", {**plain, "task": {}}, "2025-11-25")
    assert not fast.takes("tools/call", {"name": 1, "arguments": {}}, "2025-11-25")
    assert not fast.takes("tools/call", {"name": "add", "arguments": []}, "2025-11-25")
    assert not fast.takes("tools/call", None, "2025-11-25")


def test_a_middleware_not_known_to_let_a_call_through_keeps_the_sdk_path() -> None:
    server = _server()
    fast = FastCall(server)
    plain = {"name": "add", "arguments": {"a": 1, "b": 2}}
    assert all(isinstance(m, RequestStateBoundary) or type(m).__name__ == "LegacyTasks"
               or isinstance(m, WhenTraced) for m in server.middleware)

    async def own(ctx: Any, call_next: Any) -> Any:
        return await call_next(ctx)
    server.middleware.append(own)
    assert not fast.takes("tools/call", plain, "2025-11-25")


async def test_a_call_that_ends_at_once_starts_no_watcher() -> None:
    started: list[bool] = []

    async def watch() -> None:
        started.append(True)

    late = LateWatch(watch)
    late.cancel()  # the call answered within the same turn
    await asyncio.sleep(WATCH_AFTER_S * 3)  # well past the moment the watcher would start
    assert started == []


async def test_a_long_call_is_watched_and_a_hang_up_before_the_watcher_still_cancels_it(
        ) -> None:
    call = asyncio.ensure_future(asyncio.Event().wait())  # a call that runs until cancelled
    hung_up = asyncio.Event()

    async def watch() -> None:  # the client hung up already: receive() says so at once
        hung_up.set()
        call.cancel()

    late = LateWatch(watch)
    with anyio.fail_after(10):
        await hung_up.wait()
        with pytest.raises(asyncio.CancelledError):
            await call
    late.cancel()


_JSON_LEAVES = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
_JSON = st.recursive(
    _JSON_LEAVES | st.tuples(st.integers()),  # a tuple: what the surface's dump turns into a list
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.text(max_size=6) | st.integers(), inner, max_size=4),  # an int key: made a string
    max_leaves=12)
_BLOCK = st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=8)}) | \
    st.fixed_dictionaries({"type": st.sampled_from(["text", "image"]),
                           "text": st.text(max_size=4) | st.integers()})
_PLAIN_JSON = st.recursive(
    _JSON_LEAVES, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.text(max_size=6), inner, max_size=4), max_leaves=12)
_COMMON = st.fixed_dictionaries({"content": st.lists(st.fixed_dictionaries(
    {"type": st.just("text"), "text": st.text(max_size=8)}), max_size=3)}, optional={
    "isError": st.booleans(),
    "structuredContent": st.dictionaries(st.text(max_size=6), _PLAIN_JSON, max_size=4),
    "resultType": st.just("complete")})
"""What a finished call's result commonly is (a float may still be NaN or infinite)."""
_RESULT = _COMMON | st.fixed_dictionaries({"content": st.lists(_BLOCK, max_size=3)}, optional={
    "isError": st.booleans() | st.none() | st.integers(0, 1),
    "structuredContent": st.dictionaries(st.text(max_size=6), _JSON, max_size=4) | st.none()
    | _JSON,
    "resultType": st.sampled_from(["complete", "input_required", "other"]),
    "_meta": st.just({"k": 1}),
    "extra": st.just(1)})


@settings(max_examples=600, deadline=None)
@given(result=_RESULT, version=st.sampled_from(
    [*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS, "1999-01-01"]))
def test_a_plain_result_is_sieved_to_what_the_surface_gives(result: dict[str, Any],
                                                            version: str) -> None:
    """The result check's shortcut answers exactly what ``serialize_server_result`` answers,
    and leaves it every result it is not sure of."""
    plain = _plain_result(version, result)
    if plain is None:
        return
    assert json.dumps(plain) == json.dumps(serialize_server_result("tools/call", version, result))


def test_the_plain_result_shortcut_takes_what_a_finished_call_commonly_answers() -> None:
    common = {"content": [{"type": "text", "text": "42"}], "isError": False,
              "structuredContent": {"result": 42, "nested": [1.5, None, {"ok": True}]},
              "resultType": "complete"}
    for version in (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS):
        assert _plain_result(version, common) == serialize_server_result(
            "tools/call", version, common)
    for odd in ({**common, "structuredContent": {"n": float("nan")}},
                {**common, "structuredContent": {"t": (1, 2)}},
                {**common, "content": [{"type": "image", "data": "", "mimeType": "image/png"}]},
                {**common, "isError": 0}, {**common, "_meta": {}}):
        assert _plain_result("2025-11-25", odd) is None
