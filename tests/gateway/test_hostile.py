"""An upstream can fail only itself: a real upstream process (the SDK alone) that names its tools
to break the catalog, shadows a local tool, or answers too much is contained to its own tools."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from toolkeeper import ToolInvoker
from toolkeeper.config import MCPServerConfig
from toolkeeper.gateway.gateway import MCPGateway
from toolkeeper.gateway.pins import SqlitePins
from toolkeeper.toolbox import Toolbox

from .test_gateway import UPSTREAM, _calls, _invoke, _stdio

pytestmark = pytest.mark.anyio


def _offers(state: Path, *names: str) -> None:
    (state / "tools.json").write_text(json.dumps([{"name": n} for n in names]))


def _pins(state: Path) -> SqlitePins:
    (state / "state").mkdir(exist_ok=True)
    return SqlitePins(state / "state" / "toolkeeper.db")


def _pins_cli(state: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "toolkeeper.cli", "tools", "pins",
                           "--state-dir", str(state / "state")], capture_output=True, text=True, timeout=60,
                          check=False, env={**os.environ, "COLUMNS": "400"})
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_tools_whose_wire_names_collide_are_disabled_and_the_rest_served(
        tmp_path: Path) -> None:
    # 'up-a b' is sent on the MCP wire as 'up-a_b_<8 hex>', or '..._<16 hex>' when that is
    # taken: an upstream that also lists both literal names made every tools/list fail.
    digest = hashlib.sha256(b"up-a b").hexdigest()
    _offers(tmp_path, f"a_b_{digest[:8]}", f"a_b_{digest[:16]}", "a b")
    pins = _pins(tmp_path)
    toolbox = Toolbox()
    async with MCPGateway([_stdio(tmp_path)], pins=pins) as gateway:
        report = await gateway.attach(toolbox)
        exported = {d["name"] for d in toolbox.export("mcp").declarations}
    assert {"up-echo", "up-add", "up-wipe", "up-sleep"} <= exported  # the rest is served
    assert not exported & {f"up-a_b_{digest[:8]}", f"up-a_b_{digest[:16]}"}
    held = [ln for ln in report if "wire name" in ln]
    assert len(held) == 3 and all("is disabled" in ln for ln in held), report
    pin = pins.get("up-a b")
    assert pin is not None and pin.held is not None and "wire name" in pin.held
    listed = _pins_cli(tmp_path)
    assert "up-a b" in listed and "wire name" in listed


async def test_an_upstream_tool_never_replaces_a_local_tool_of_the_same_name(
        tmp_path: Path) -> None:
    def echo(text: str) -> str:
        """Echo, locally."""
        return f"local: {text}"

    toolbox = Toolbox()
    toolbox.add(echo, namespace="up")
    assert "up-echo" in toolbox.names()
    pins = _pins(tmp_path)
    async with MCPGateway([_stdio(tmp_path, risk="safe")], pins=pins) as gateway:
        report = await gateway.attach(toolbox)
        await gateway.refresh("up")  # and not on a later listing either
        result = await _invoke(ToolInvoker(toolbox), "up-echo", text="hi")
        added = await _invoke(ToolInvoker(toolbox), "up-add", a=1, b=2)
    assert result.text == "local: hi"  # type: ignore[attr-defined]
    assert added.text == "3"  # type: ignore[attr-defined]  # the rest is served
    assert toolbox.get("up-echo").description == "Echo, locally."  # type: ignore[union-attr]
    assert [t["tool"] for t in _calls(tmp_path)] == ["add"]
    assert any("'up-echo'" in ln and "local tool" in ln for ln in report), report
    pin = pins.get("up-echo")
    assert pin is not None and pin.held is not None and "local tool" in pin.held
    assert "local tool" in _pins_cli(tmp_path)


async def test_an_upstream_result_over_the_cap_is_refused_and_a_large_one_offloaded(
        tmp_path: Path) -> None:
    from toolkeeper.artifacts import MemoryBlobStore

    _offers(tmp_path, "big")
    toolbox = Toolbox()
    config = _stdio(tmp_path, risk="safe", max_result_bytes=1024 * 1024)
    async with MCPGateway([config]) as gateway:
        await gateway.attach(toolbox)
        invoker = ToolInvoker(toolbox, artifact_store=MemoryBlobStore())
        huge = await _invoke(invoker, "up-big", size=4 * 1024 * 1024)
        assert huge.status == "error"  # type: ignore[attr-defined]
        assert "1048576 bytes" in huge.text and "max_result_bytes" in huge.text  # type: ignore[attr-defined]
        # the upstream is not blamed as down: the next call is served at once
        large = await _invoke(invoker, "up-big", size=200_000)
        assert large.status == "ok"  # type: ignore[attr-defined]
        assert large.artifact_ref and len(large.text) < 20_000  # type: ignore[attr-defined]
        assert (await _invoke(invoker, "up-echo", text="fine")).text == "fine"  # type: ignore[attr-defined]


@pytest.fixture
def counted_http() -> Iterator[tuple[str, list[str]]]:
    """A loopback HTTP server that serves a schema to any GET and counts the requests: (its
    base URL, the paths asked)."""
    asked: list[str] = []

    class Schema(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the standard library names it
            asked.append(self.path)
            body = b'{"type": "string"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Schema)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", asked
    server.shutdown()
    thread.join(timeout=10)


async def test_a_schema_reference_outside_the_schema_is_never_fetched_and_refuses_its_tool(
        tmp_path: Path, counted_http: tuple[str, list[str]]) -> None:
    base, asked = counted_http
    local = tmp_path / "query.json"
    local.write_text('{"type": "string"}')
    (tmp_path / "tools.json").write_text(json.dumps([
        {"name": name, "input_schema": {"type": "object", "properties": {"q": {"$ref": ref}}}}
        for name, ref in (("fetches", f"{base}/query.json"), ("reads", local.as_uri()),
                          ("fetches_later", f"{base}/deep.json#/$defs/q"))]))
    toolbox = Toolbox()
    async with MCPGateway([_stdio(tmp_path)], pins=_pins(tmp_path)) as gateway:
        report = await gateway.attach(toolbox)
        echoed = await _invoke(ToolInvoker(toolbox), "up-echo", text="hi")
    assert asked == []  # listing the upstream made no request
    names = set(toolbox.names())
    assert {"up-echo", "up-add", "up-wipe", "up-sleep"} <= names  # its other tools work
    assert not names & {"up-fetches", "up-reads", "up-fetches_later"}
    assert echoed.text == "hi"  # type: ignore[attr-defined]
    for name, ref in (("up-fetches", f"{base}/query.json"), ("up-reads", local.as_uri())):
        (line,) = [ln for ln in report if f"'{name}'" in ln]
        assert f"mcp tool '{name}' is not served" in line, report
        assert f"refer to {ref!r} ($ref), outside the schema" in line
        assert "never fetches" in line and "'#/$defs/NAME'" in line


@pytest.fixture
def http_upstream(tmp_path: Path) -> Iterator[str]:
    port_file = tmp_path / "port"
    proc = subprocess.Popen([sys.executable, UPSTREAM, str(tmp_path), "--http", str(port_file)])
    deadline = time.monotonic() + 30
    while not (port_file.exists() and port_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port_file.read_text()}/mcp"
    proc.kill()
    proc.wait(timeout=30)


async def test_an_http_upstream_result_over_the_cap_is_refused(
        tmp_path: Path, http_upstream: str) -> None:
    _offers(tmp_path, "big")
    toolbox = Toolbox()
    config = MCPServerConfig(name="up", url=http_upstream, connect_timeout_s=10,
                             call_timeout_s=30, risk="safe", max_result_bytes=1024 * 1024)
    async with MCPGateway([config]) as gateway:
        await gateway.attach(toolbox)
        invoker = ToolInvoker(toolbox)
        huge = await _invoke(invoker, "up-big", size=4 * 1024 * 1024)
        assert huge.status == "error"  # type: ignore[attr-defined]
        assert "1048576 bytes" in huge.text and "max_result_bytes" in huge.text  # type: ignore[attr-defined]
        small = await _invoke(invoker, "up-big", size=1000)
        assert small.status == "ok" and len(small.text) == 1000  # type: ignore[attr-defined]


async def test_an_endless_page_chain_is_cut_by_pages_tools_and_time_and_said(
        tmp_path: Path) -> None:
    (tmp_path / "endless").write_text("0")
    by_pages, by_tools, by_time = Toolbox(), Toolbox(), Toolbox()
    async with MCPGateway([_stdio(tmp_path, max_list_pages=5)]) as gateway:
        pages_report = await gateway.attach(by_pages)
    async with MCPGateway([_stdio(tmp_path, max_tools=3)]) as gateway:
        tools_report = await gateway.attach(by_tools)
    (tmp_path / "endless").write_text("0.4")
    async with MCPGateway([_stdio(tmp_path, list_timeout_s=1.5)]) as gateway:
        time_report = await gateway.attach(by_time)
    assert by_pages.names() == [f"up-page{n}" for n in range(5)]  # what was listed is served
    assert any("more than 5 pages" in ln and "max_list_pages" in ln for ln in pages_report)
    assert by_tools.names() == ["up-page0", "up-page1", "up-page2"]
    assert any("more than 3 tools" in ln and "max_tools" in ln for ln in tools_report)
    assert 0 < len(by_time.names()) < 50
    assert any("1.5 s" in ln and "list_timeout_s" in ln for ln in time_report), time_report


async def test_a_connection_still_closing_never_takes_the_new_one_down_with_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # After an answer over the cap the connection is dropped and the next call reconnects at
    # once. When the old upstream process was slower to stop than the new one to start (a busy
    # machine), the old connection's end forgot the new connection: the call after that got
    # "unreachable: no answer". The old process's stop is held here until the new one served.
    import anyio

    from toolkeeper.artifacts import MemoryBlobStore
    from toolkeeper.gateway import capped
    from toolkeeper.gateway.upstream import Upstream

    real_stop, real_hold, stops, holds = capped._stop, Upstream._hold, 0, 0
    release, first_ended = anyio.Event(), anyio.Event()

    async def held_stop(process: object) -> None:
        nonlocal stops
        stops += 1
        if stops == 1:
            await release.wait()
        await real_stop(process)  # type: ignore[arg-type]

    async def hold(self: Upstream, attempt: anyio.Event) -> None:
        nonlocal holds
        holds += 1
        first = holds == 1
        try:
            await real_hold(self, attempt)
        finally:
            if first:
                first_ended.set()

    monkeypatch.setattr(capped, "_stop", held_stop)
    monkeypatch.setattr(Upstream, "_hold", hold)
    _offers(tmp_path, "big")
    toolbox = Toolbox()
    config = _stdio(tmp_path, risk="safe", max_result_bytes=64 * 1024)
    async with MCPGateway([config]) as gateway:
        await gateway.attach(toolbox)
        invoker = ToolInvoker(toolbox, artifact_store=MemoryBlobStore())
        huge = await _invoke(invoker, "up-big", size=256 * 1024)
        assert huge.status == "error" and "max_result_bytes" in huge.text  # type: ignore[attr-defined]
        assert (await _invoke(invoker, "up-echo", text="new")).text == "new"  # type: ignore[attr-defined]
        release.set()  # the old connection ends only now, after the new one served
        with anyio.fail_after(30):
            await first_ended.wait()
        again = await _invoke(invoker, "up-echo", text="still")
        assert again.text == "still", again.text  # type: ignore[attr-defined]
        assert holds == 2  # the new connection was kept, not reopened
