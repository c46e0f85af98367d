"""What an upstream says is untrusted, and an upstream that says it badly fails only itself: a
real ``toolkeeper serve`` relaying a real upstream process that speaks raw JSON-RPC over stdio
(``raw_upstream.py``), called by the official MCP client (and raw HTTP where the bytes matter).

- Lone surrogates in its answer reach clients as U+FFFD, never as escapes no client can parse.
- A tool declared in megabytes is not served (a report line names it, its size and the bound);
  a tool whose declaration is not one is not served (a line names it and why); the rest are.
- What it writes to stderr is shown prefixed with its name, control characters escaped.
- An answer that is not a result object answers its call at once, as the upstream's error."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from toolkeeper.config import MCPServerConfig
from toolkeeper.gateway.gateway import MCPGateway
from toolkeeper.toolbox import Toolbox

from ..server.test_serve import CLIENT_TOKENS, TOKEN, _client, _start
from ..server.test_serve_gateway import _until_listed
from .test_lean_hostile import ADD, _Upstream
from .test_lean_hostile import upstream as http_upstream  # noqa: F401  (a fixture)

pytestmark = pytest.mark.anyio
RAW = str(Path(__file__).resolve().parent / "raw_upstream.py")


class Served:
    """A running serve: its URL and the lines it has written to stderr so far."""

    def __init__(self, proc: subprocess.Popen[str], url: str) -> None:
        self.proc, self.url = proc, url
        self.lines: list[str] = []
        self._new: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._new.put(line)
        self._new.put(None)

    def until(self, needle: str, timeout_s: float = 60) -> list[str]:
        """Every stderr line so far, once one holds ``needle`` (the test fails after
        ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        while not any(needle in line for line in self.lines):
            left = deadline - time.monotonic()
            try:
                line = self._new.get(timeout=max(left, 0.01))
            except queue.Empty:
                line = None
            if line is None and (left <= 0 or self.proc.poll() is not None):
                pytest.fail(f"serve never wrote {needle!r}: {self.lines[-20:]!r}")
            if line is not None:
                self.lines.append(line)
        return self.lines


@pytest.fixture
def serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
          ) -> Iterator[Served]:
    """``toolkeeper serve`` relaying ``raw_upstream.py`` as MCP server 'raw' (flag files for
    the upstream go in ``tmp_path / "raw"`` before the fixture is asked for, Cedar policies in
    ``tmp_path / "policies"``; serve's own arguments are the test's parameter, if any)."""
    monkeypatch.setenv("TOOLKEEPER_TOKEN", TOKEN)
    state = tmp_path / "raw"
    state.mkdir(exist_ok=True)
    config = tmp_path / "toolkeeper.toml"
    config.write_text(
        "[mcp]\nenabled = true\n[[mcp.servers]]\nname = \"raw\"\nsandbox = false\n"
        f"command = {json.dumps(sys.executable)}\nargs = {json.dumps([RAW, str(state)])}\n"
        "connect_timeout_s = 30\ncall_timeout_s = 60\nrisk = \"safe\"\n"
        + (f"[policy]\ndir = {json.dumps(str(tmp_path / 'policies'))}\n"
           if (tmp_path / "policies").is_dir() else ""))
    proc, url = _start(tmp_path, "--config", str(config), *getattr(request, "param", ()))
    served = Served(proc, url)
    try:
        yield served
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)


def _flag(tmp_path: Path, name: str) -> Path:
    (tmp_path / "raw").mkdir(exist_ok=True)
    (tmp_path / "raw" / name).write_text("yes")
    return tmp_path


async def test_lone_surrogates_in_an_upstream_answer_reach_clients_as_replacement_characters(
        serve: Served) -> None:
    async with _client(serve.url) as client:
        await _until_listed(client, "raw-surrogate")
        result = await client.call_tool("raw-surrogate", {})
        assert [getattr(c, "text", None) for c in result.content] == ["a\ufffdb\ufffdc"]
        assert result.structured_content == {"k\ufffd": ["v\ufffd"]}
        echoed = await client.call_tool("raw-echo", {"text": "still here"})
        assert getattr(echoed.content[0], "text", None) == "still here"
    answer = httpx.post(f"{serve.url}/mcp", timeout=60, json={
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "raw-surrogate", "arguments": {}}}, headers={
        "Authorization": f"Bearer {CLIENT_TOKENS[serve.url]}",
        "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"})
    assert b"\\ud8" not in answer.content.lower() and b"\\udf" not in answer.content.lower()
    assert "a\ufffdb\ufffdc" in answer.content.decode()


@pytest.fixture
def big(tmp_path: Path) -> Path:
    return _flag(tmp_path, "bigschema")


@pytest.mark.parametrize("serve", [("--sessions",)], indirect=True)
async def test_a_tool_declared_in_megabytes_is_not_served_and_the_listing_works(
        big: Path, serve: Served) -> None:
    lines = serve.until("MCP server(s) 'raw' listed")
    (line,) = [ln for ln in lines if "'raw-big'" in ln]
    assert "is not served" in line and "65536 bytes" in line, line
    size = int(line.split("takes ")[1].split()[0])
    assert size > 1_900_000
    async with _client(serve.url) as client:  # 2025-11-25, to serve --sessions
        names = {t.name for t in (await client.list_tools()).tools}
    assert "raw-echo" in names and "raw-big" not in names


@pytest.fixture
def bad(tmp_path: Path) -> Path:
    return _flag(tmp_path, "badschema")


async def test_a_tool_whose_declaration_is_invalid_is_not_served_and_the_rest_are(
        bad: Path, serve: Served) -> None:
    lines = serve.until("MCP server(s) 'raw' listed")
    (line,) = [ln for ln in lines if "'raw-badschema'" in ln]
    assert "is not served" in line and "inputSchema" in line, line
    assert not [ln for ln in lines if "connection failed" in ln], lines
    async with _client(serve.url) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        echoed = await client.call_tool("raw-echo", {"text": "served"})
    assert {"raw-echo", "raw-surrogate"} <= names and "raw-badschema" not in names
    assert getattr(echoed.content[0], "text", None) == "served"


async def test_what_an_upstream_writes_to_stderr_is_shown_as_its_own_and_escaped(
        serve: Served) -> None:
    async with _client(serve.url) as client:
        await _until_listed(client, "raw-ansi")
        await client.call_tool("raw-ansi", {"text": "written"})
    lines = serve.until("\\x1b[0m")
    told = [ln for ln in lines if ln.startswith("[mcp server 'raw'] ")]
    assert "[mcp server 'raw'] toolkeeper: MCP server 'raw' listed: 0 tool(s) served\n" in told
    assert "[mcp server 'raw'] \\x1b]0;pwned-title\\x07\\x1b[31mFAKE\\x1b[0m\n" in told
    assert not [ln for ln in lines if "\x1b" in ln or "\x07" in ln], lines
    assert not [ln for ln in lines if ln.startswith("toolkeeper: MCP server 'raw' listed: 0")]


async def test_an_answer_whose_result_is_not_an_object_fails_its_call_at_once(
        serve: Served) -> None:
    async with _client(serve.url) as client:  # the upstream's call_timeout_s is 60 s
        await _until_listed(client, "raw-notobj")
        with anyio.fail_after(20):
            result = await client.call_tool("raw-notobj", {})
        text = getattr(result.content[0], "text", "")
        assert result.is_error and "malformed answer" in text and "not an object" in text, text
        assert "within" not in text and "partial effects" not in text, text
        echoed = await client.call_tool("raw-echo", {"text": "next"})
    assert getattr(echoed.content[0], "text", None) == "next"


async def test_an_http_upstream_s_invalid_tool_is_left_out_and_its_other_tools_served(
        http_upstream: _Upstream) -> None:  # noqa: F811
    http_upstream.tools = [ADD, {"name": "bad", "inputSchema": {"type": "objekt",
                                                                "properties": 5}}]
    url = f"http://127.0.0.1:{http_upstream.server_address[1]}/mcp"
    toolbox = Toolbox()
    config = MCPServerConfig(name="up", url=url, connect_timeout_s=10, call_timeout_s=30,
                             risk="safe")
    async with MCPGateway([config]) as gateway:
        report = await gateway.attach(toolbox)
    assert set(toolbox.names()) == {"up-add"}, report
    (line,) = [ln for ln in report if "'up-bad'" in ln]
    assert "is not served" in line and "inputSchema" in line, report


@pytest.fixture
def policies(tmp_path: Path) -> Path:
    folder = tmp_path / "policies"
    folder.mkdir()
    (folder / "upstream.cedar").write_text(
        '@id("no-echo")\nforbid (principal, action == Action::"raw-echo", resource);\n'
        '@id("no-such")\nforbid (principal, action == Action::"raw-nosuch", resource);\n')
    return folder


async def test_a_policy_naming_an_upstream_tool_by_action_is_served_and_checked_once_listed(
        policies: Path, serve: Served) -> None:
    lines = serve.until("no tool or action 'raw-nosuch'")  # said once 'raw' is listed
    (line,) = [ln for ln in lines if "'raw-nosuch'" in ln]
    assert "upstream.cedar" in line and "the last good set still decides" in line, line
    async with _client(serve.url) as client:
        await _until_listed(client, "raw-surrogate")
        refused = await client.call_tool("raw-echo", {"text": "no"})
        served = await client.call_tool("raw-ansi", {"text": "yes"})
    assert refused.is_error and "no-echo" in getattr(refused.content[0], "text", ""), refused
    assert getattr(served.content[0], "text", None) == "yes"
