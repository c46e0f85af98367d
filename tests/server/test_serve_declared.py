"""What ``toolkeeper serve`` declares over MCP is what it does, through the real process and the
official client: the list changes it says it sends (``listChanged``) are the ones it sends, on
stdio, on HTTP with sessions and answering statelessly; a relayed elicitation reads as the docs
say; a tool that asks the client on a stateless connection says what is wrong (never that the
client failed to declare); a resource that is not there answers the code of the revision the
session negotiated."""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from ..gateway.test_relay import _serve
from ..processes import no_traceback
from .test_serve import CLIENT_TOKENS, ROOT, TOKEN, _start

pytestmark = pytest.mark.anyio
CONFORMANCE_TOOLS = str(ROOT / "tests" / "mcp" / "conformance" / "conformance_tools.py")
MISSING = "toolkeeper://mcp/nope/file:///x"


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[TextIO]:
    """Where the served process's stderr goes."""
    with (tmp_path / "serve.log").open("w") as log:
        yield log


def _http(url: str, mode: str, **callbacks: Any) -> Client:
    """The official client over Streamable HTTP with the server's client token: ``legacy``
    (the 2025-11-25 handshake) or ``auto`` (2026-07-28)."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {CLIENT_TOKENS[url]}"},
                              timeout=60)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode,
                  **callbacks)


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=20) in (0, 130)
    no_traceback(proc)


def _declared(capabilities: types.ServerCapabilities) -> dict[str, bool]:
    return {"tools": bool(capabilities.tools and capabilities.tools.list_changed),
            "prompts": bool(capabilities.prompts and capabilities.prompts.list_changed),
            "resources": bool(capabilities.resources and capabilities.resources.list_changed)}


class _Heard:
    """The list-change notifications a client heard, and a bounded wait for them."""

    def __init__(self) -> None:
        self.kinds: set[str] = set()
        self.changed = anyio.Event()

    async def __call__(self, message: Any) -> None:
        kind = {types.ToolListChangedNotification: "tools",
                types.PromptListChangedNotification: "prompts",
                types.ResourceListChangedNotification: "resources"}.get(type(message))
        if kind is not None:
            self.kinds.add(kind)
            self.changed.set()

    async def until(self, wanted: set[str], timeout_s: float = 30) -> None:
        with anyio.move_on_after(timeout_s):
            while not wanted <= self.kinds:
                await self.changed.wait()
                self.changed = anyio.Event()
        assert wanted <= self.kinds, f"heard only {sorted(self.kinds)} of {sorted(wanted)}"


async def _grown(client: Client) -> None:
    """The upstream listed, then told to add a tool and a prompt (it says both changed)."""
    with anyio.fail_after(30):
        while "up-grow" not in {t.name for t in (await client.list_tools()).tools}:
            await anyio.sleep(0.1)
    assert not (await client.call_tool("up-grow", {})).is_error


async def test_over_stdio_the_gateway_declares_the_prompt_and_resource_changes_it_sends(
        tmp_path: Path, errlog: TextIO) -> None:
    heard = _Heard()
    async with Client(stdio_client(_serve(tmp_path), errlog=errlog), mode="legacy",
                      message_handler=heard) as client:
        declared = _declared(client.server_capabilities)
        await _grown(client)
        await heard.until({"tools", "prompts"})
    assert declared == {"tools": True, "prompts": True, "resources": True}


async def test_over_http_with_sessions_serve_declares_and_sends_each_list_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLKEEPER_TOKEN", TOKEN)
    _serve(tmp_path)  # writes toolkeeper.toml
    proc, url = _start(tmp_path, "--config", str(tmp_path / "toolkeeper.toml"), "--sessions")
    heard = _Heard()
    try:
        async with _http(url, "legacy", message_handler=heard) as client:
            declared = _declared(client.server_capabilities)
            await _grown(client)
            await heard.until({"tools", "prompts"})
    finally:
        _stop(proc)
    assert declared == {"tools": True, "prompts": True, "resources": True}


async def test_answering_statelessly_serve_declares_no_change_it_cannot_send_and_a_listener_hears_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLKEEPER_TOKEN", TOKEN)
    _serve(tmp_path)
    proc, url = _start(tmp_path, "--config", str(tmp_path / "toolkeeper.toml"))
    try:
        async with _http(url, "legacy") as legacy:
            stateless = _declared(legacy.server_capabilities)
        async with _http(url, "auto") as client:  # 2026-07-28: a subscriptions/listen stream
            listening = _declared(client.server_capabilities)
            async with client.listen(prompts_list_changed=True) as events:
                await _grown(client)
                with anyio.move_on_after(30):
                    async for event in events:
                        seen = event
                        break
    finally:
        _stop(proc)
    assert stateless == {"tools": False, "prompts": False, "resources": False}
    assert listening == {"tools": True, "prompts": True, "resources": True}
    assert "seen" in locals(), "no prompt list change came on the listen stream"


async def test_a_relayed_elicitation_reads_as_the_docs_say(
        tmp_path: Path, errlog: TextIO) -> None:
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Grace"})

    async with Client(stdio_client(_serve(tmp_path, elicitation=True), errlog=errlog),
                      mode="legacy", elicitation_callback=elicit) as client:
        await _grown(client)
        named = await client.call_tool("up-ask_user", {})
    doc = (ROOT / "docs" / "mcp.md").read_text()
    (form,) = re.findall(r"`(MCP server 'NAME' asks: [A-Z]+)`", doc) or [None]
    assert not named.is_error and form is not None, "docs/mcp.md does not show the form"
    assert asked == [form.replace("NAME", "up").replace("MESSAGE", "What is your name?")]


async def test_a_tool_asking_the_client_on_a_stateless_connection_says_why_it_cannot(
        tmp_path: Path) -> None:
    async def sample(_ctx: Any, _params: Any) -> types.CreateMessageResult:
        return types.CreateMessageResult(role="assistant", model="m",
                                         content=types.TextContent(text="hi"))

    proc, url = _start(tmp_path, tools=CONFORMANCE_TOOLS)
    try:
        async with _http(url, "legacy", sampling_callback=sample) as client:
            with pytest.raises(MCPError) as failed:
                await client.call_tool("test_sampling", {"prompt": "Say hi"})
    finally:
        _stop(proc)
    assert failed.value.code == -32600, failed.value
    assert "--sessions" in failed.value.message and "declare" not in failed.value.message


@pytest.mark.parametrize(("mode", "code"), [("legacy", -32002), ("auto", -32602)])
async def test_a_resource_that_is_not_there_answers_the_code_of_the_negotiated_revision(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, code: int) -> None:
    monkeypatch.setenv("TOOLKEEPER_TOKEN", TOKEN)
    _serve(tmp_path)  # a gateway: its namespace's URIs are answered by the gateway
    proc, url = _start(tmp_path, "--config", str(tmp_path / "toolkeeper.toml"))
    errors: list[MCPError] = []
    try:
        async with _http(url, mode) as client:
            for uri in ("test://nonexistent-resource", MISSING):
                with pytest.raises(MCPError) as failed:
                    await client.read_resource(uri)
                errors.append(failed.value)
    finally:
        _stop(proc)
    assert [(e.code, e.data) for e in errors] == [
        (code, {"uri": "test://nonexistent-resource"}), (code, {"uri": MISSING})]
