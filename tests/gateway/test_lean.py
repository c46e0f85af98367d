"""A plain relayed call to an HTTP upstream, posted by the gateway itself, answers the client
exactly what the SDK client's path answers.

Two real ``toolkeeper serve`` processes in front of the same real upstream (the SDK's own
server, over Streamable HTTP on loopback): one as shipped (each call its lean path posts
counted in a file), one with the lean path switched off (every call through the SDK's client).
The same requests — a plain result, structured content, an error result, the upstream's
JSON-RPC error, tools unknown to either side, an answer over the cap — get the same status,
headers and body from both, byte for byte once the date and generated ids are set aside; so do
the calls to an upstream that answers as event streams (with a log line and progress on the
stream) and whose session expires. The lean path is taken exactly for the calls nobody hears
the progress of; a call the client abandons is cancelled on both."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from ..processes import no_traceback
from ..server.test_modern import _call, _count, _post
from ..server.test_serve import CLIENT_TOKENS, _started

UPSTREAM = str(Path(__file__).resolve().parent / "upstream_server.py")
CAP = 20_000
"""``max_result_bytes`` of the upstream in these tests."""
EXTRA = [{"name": "oops", "description": "A tool the upstream lists but does not have."},
         {"name": "refuse", "description": "Answers a JSON-RPC error."},
         {"name": "big", "description": "Answers size bytes."},
         {"name": "fail", "description": "Answers JSON-RPC's generic server error."}]
_RUN = "runpy.run_module('toolkeeper.cli', run_name='__main__', alter_sys=True)\n"
COUNTED = ("import os, runpy\n"
           "from toolkeeper.gateway import lean\n"
           "call = lean.LeanLink.call\n"
           "async def counted(*args, **kwargs):\n"
           "    with open(os.environ['LEAN_COUNT'], 'a') as count:\n"
           "        count.write('.')\n"
           "    return await call(*args, **kwargs)\n"
           "lean.LeanLink.call = counted\n" + _RUN)
"""``toolkeeper serve`` as shipped, each call its lean path posts counted in a file."""
SDK_ONLY = ("import runpy\n"
            "from toolkeeper.gateway import lean\n"
            "lean.LeanLink.takes = lambda *args: False\n" + _RUN)
"""``toolkeeper serve`` with the lean path switched off."""


def _upstream(where: Path, *, streams: bool) -> tuple[subprocess.Popen[bytes], str]:
    where.mkdir()
    (where / "relay").write_text("yes")
    (where / "tools.json").write_text(json.dumps(EXTRA))
    if streams:
        (where / "sse").write_text("yes")
    port_file = where / "port"
    proc = subprocess.Popen([sys.executable, UPSTREAM, str(where), "--http", str(port_file)])
    deadline = time.monotonic() + 30
    while not (port_file.exists() and port_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert port_file.exists() and port_file.read_text(), "the upstream did not start in 30 s"
    return proc, f"http://127.0.0.1:{port_file.read_text()}/mcp"


def _serve(where: Path, program: str, upstream: str) -> tuple[subprocess.Popen[str], str]:
    where.mkdir()
    config = where / "toolkeeper.toml"
    config.write_text(
        "[mcp]\nenabled = true\n[[mcp.servers]]\nname = \"up\"\n"
        f"url = {json.dumps(upstream)}\nconnect_timeout_s = 30\ncall_timeout_s = 30\n"
        f"risk = \"safe\"\nmax_result_bytes = {CAP}\ntrust = \"first-use\"\n")
    env = {k: v for k, v in os.environ.items() if k != "TOOLKEEPER_TOKEN"}
    env["LEAN_COUNT"] = str(where / "count")
    proc = subprocess.Popen(
        [sys.executable, "-c", program, "serve", "--no-builtins", "--port", "0",
         "--state-dir", str(where / "state"), "--approval-wait", "0", "--rate-limit", "0",
         "--config", str(config)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=where)
    return proc, _started(proc, where / "state")


def _listed(url: str, name: str) -> None:
    """Wait until serve lists ``name`` (it lists its upstream after it starts serving)."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {
        "_meta": json.loads(_call("x"))["params"]["_meta"]}}).encode()
    deadline, seen = time.monotonic() + 60, b""
    while time.monotonic() < deadline:
        seen = _post(url, body, {"Mcp-Method": "tools/list", "Mcp-Name": ""})[2]
        if f'"name":"{name}"'.encode() in seen:
            return
        time.sleep(0.1)
    pytest.fail(f"serve did not list {name} within 60 s: {seen[:500]!r}")


@pytest.fixture(scope="module", params=["json", "event streams"])
def both(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[tuple[str, str, Path, Path]]:
    """(the lean serve's URL, the SDK-only serve's URL, the lean serve's folder, the
    upstream's folder), the upstream answering in JSON or as event streams."""
    tmp_path = tmp_path_factory.mktemp("lean")
    upstream, upstream_url = _upstream(tmp_path / "up", streams=request.param != "json")
    lean, lean_url = _serve(tmp_path / "lean", COUNTED, upstream_url)
    sdk, sdk_url = _serve(tmp_path / "sdk", SDK_ONLY, upstream_url)
    try:
        for url in (lean_url, sdk_url):
            _listed(url, "up-refuse")
        yield lean_url, sdk_url, tmp_path / "lean", tmp_path / "up"
    finally:
        for proc in (lean, sdk):
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=20) in (0, 130)
            no_traceback(proc)
        upstream.kill()
        upstream.wait(timeout=30)


REQUESTS: dict[str, tuple[bytes, dict[str, str], int]] = {
    "a plain result": (_call("up-echo", {"text": "hello ☂"}), {}, 1),
    "structured content": (_call("up-add", {"a": 2, "b": 40}), {}, 1),
    "an error result": (_call("up-oops", {}), {}, 1),
    "the upstream's JSON-RPC error": (_call("up-refuse", {}), {}, 1),
    "a tool the upstream does not list": (_call("up-nothing", {}), {}, 0),
    "log lines and progress on the answer": (_call("up-chatty", {}), {}, 1),
    "progress the client hears": (_call("up-chatty", {}, meta={"progressToken": "p"}), {}, 0),
    "arguments the tool refuses": (_call("up-add", {"a": "two"}), {}, 0),
    "an answer over the cap": (_call("up-big", {"size": CAP * 2}), {}, 1),
}


@pytest.mark.parametrize("case", REQUESTS)
def test_a_lean_relayed_call_answers_byte_for_byte_what_the_sdk_client_s_path_answers(
        both: tuple[str, str, Path, Path], case: str) -> None:
    lean_url, sdk_url, lean_dir, _ = both
    body, headers, lean = REQUESTS[case]
    before = _count(lean_dir)
    fast = _post(lean_url, body, headers)
    assert _count(lean_dir) - before == lean, f"lean path taken: {case}"
    sdk = _post(sdk_url, body, headers)
    assert fast == sdk
    assert fast[0] == 200, fast
    if case == "a plain result":
        assert b'"text":"hello \\u2602"' in fast[2] or "hello ☂".encode() in fast[2], fast
    if case == "structured content":
        assert b'"structuredContent":{"sum":42}' in fast[2], fast
    if case in ("an error result", "the upstream's JSON-RPC error"):
        assert b'"isError":true' in fast[2], fast
    if case == "the upstream's JSON-RPC error":
        assert b"the upstream refuses this call" in fast[2], fast
    if case == "an answer over the cap":
        assert b"raise max_result_bytes" in fast[2], fast


@pytest.mark.parametrize("both", ["event streams"], indirect=True)  # a stateful upstream
def test_an_expired_upstream_session_answers_as_on_the_sdk_client_s_path(
        both: tuple[str, str, Path, Path]) -> None:
    """The upstream forgets the session (``404``): the call that meets it, and the next one,
    answer on the lean path what they answer on the SDK client's."""
    lean_url, sdk_url, lean_dir, up_dir = both
    seen: list[Any] = []
    for url in (lean_url, sdk_url):
        (up_dir / "expire").write_text("yes")
        before = _count(lean_dir)
        gone = _post(url, _call("up-echo", {"text": "gone?"}), {})
        assert not (up_dir / "expire").exists(), "the call did not reach the upstream"
        after = _post(url, _call("up-echo", {"text": "after"}), {})
        seen.append((gone, after, _count(lean_dir) - before))
    (lean_gone, lean_after, lean_count), (sdk_gone, sdk_after, sdk_count) = seen
    assert (lean_gone, lean_after) == (sdk_gone, sdk_after)
    assert (lean_count, sdk_count) == (2, 0)
    assert b"Session not found" in lean_gone[2], lean_gone


def test_after_an_answer_over_the_cap_the_upstream_is_reached_again(
        both: tuple[str, str, Path, Path]) -> None:
    """The connection an answer over the cap came on is dropped on both paths; the next
    calls reconnect (the SDK client's path after its backoff: its transport ends with the
    answer) and are answered."""
    lean_url, sdk_url, _, _ = both
    for url in (lean_url, sdk_url):
        _reached(url)  # an earlier answer over the cap may have left a backoff
        refused = _post(url, _call("up-big", {"size": CAP * 2}), {})
        assert b"raise max_result_bytes" in refused[2], refused
        _reached(url)


def test_an_upstreams_generic_error_answers_its_call_and_leaves_the_others_running(
        both: tuple[str, str, Path, Path]) -> None:
    """An upstream's answer ``-32000`` (JSON-RPC's generic server error; the SDK also uses
    that code when it finds a connection closed) was taken for a broken connection: the
    connection was dropped, and every other call on it, another client's too, failed."""
    lean_url, sdk_url, _, up_dir = both
    for url in (lean_url, sdk_url):
        _reached(url)
        slow: list[tuple[int, list[tuple[str, str]], bytes]] = []
        sleeper = threading.Thread(target=lambda into=slow, at=url: into.append(_post(
            at, _call("up-sleep", {"seconds": 3}), {})))
        log = up_dir / "calls"
        started = log.read_text().count('"sleep"') if log.exists() else 0
        sleeper.start()
        deadline = time.monotonic() + 30
        while (log.read_text().count('"sleep"') if log.exists() else 0) == started:
            assert time.monotonic() < deadline, "the sleep call did not reach the upstream"
            time.sleep(0.02)
        failed = _post(url, _call("up-fail", {}), {})
        sleeper.join(60)
        assert b"generic server error" in failed[2] and b"refused the request" in failed[2], \
            failed
        assert slow and b'"text":"slept"' in slow[0][2], slow


def _reached(url: str) -> None:
    """Call ``up-echo`` until it is answered (the test fails after 30 s)."""
    deadline = time.monotonic() + 30
    seen: tuple[int, list[tuple[str, str]], bytes] = (0, [], b"")
    while b'"text":"again"' not in seen[2] and time.monotonic() < deadline:
        seen = _post(url, _call("up-echo", {"text": "again"}), {})
    assert b'"text":"again"' in seen[2], seen


def _client(url: str) -> Client:
    """The official client on the 2025-11-25 handshake (it cancels a call it abandons with
    ``notifications/cancelled``)."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {CLIENT_TOKENS[url]}"},
                              timeout=60)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http), mode="legacy")


def _slept(up_dir: Path) -> int:
    calls = up_dir / "calls"
    return sum(json.loads(line)["tool"] == "sleep" for line in calls.read_text().splitlines()
               ) if calls.exists() else 0


def _audited(where: Path) -> list[tuple[str, str | None]]:
    with sqlite3.connect(where / "state" / "toolkeeper.db") as db:
        return db.execute("SELECT status, error_code FROM audit WHERE tool = 'up-sleep' AND "
                          "json_extract(arguments, '$.seconds') = 30").fetchall()


@pytest.mark.anyio
async def test_a_call_the_client_abandons_is_cancelled_as_on_the_sdk_client_s_path(
        both: tuple[str, str, Path, Path]) -> None:
    """The client cancels a call mid-way: serve records it cancelled on both paths, and an
    upstream that keeps sessions is told (its tool stops)."""
    lean_url, sdk_url, lean_dir, up_dir = both
    rows = []
    for url, where in ((lean_url, lean_dir), (sdk_url, lean_dir.parent / "sdk")):
        before, started = _count(lean_dir), _slept(up_dir)
        async with _client(url) as client, anyio.create_task_group() as group:
            group.start_soon(client.call_tool, "up-sleep", {"seconds": 30})
            with anyio.fail_after(30):  # the call reaches the upstream
                while _slept(up_dir) == started:
                    await anyio.sleep(0.05)
            group.cancel_scope.cancel()
        seen: list[tuple[str, str | None]] = []
        with anyio.fail_after(30):  # serve records the call as cancelled
            while not seen:
                seen = _audited(where)
                await anyio.sleep(0.05)
        rows.append((seen, _count(lean_dir) - before))
        if (up_dir / "sse").exists():  # a session the upstream keeps: it hears the cancel
            with anyio.fail_after(30):
                while _cancelled(up_dir) < len(rows):
                    await anyio.sleep(0.05)
    assert rows == [([("error", "cancelled")], 1), ([("error", "cancelled")], 0)]


def _cancelled(up_dir: Path) -> int:
    cancelled = up_dir / "cancelled"
    return len(cancelled.read_text().splitlines()) if cancelled.exists() else 0
