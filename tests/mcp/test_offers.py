"""Resources, prompts, completion and logging as clients meet them: artifacts are scoped to
the client whose calls stored them, through the real HTTP face with two client tokens."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from toolkeeper import ImageBlock, MemoryBlobStore, ToolInvoker, ToolResult, prompt, resource, tool
from toolkeeper.server.app import create_app
from toolkeeper.server.clients import ClientTokens

PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5E"
       "rkJggg==")


@tool
def snapshot(label: str) -> ToolResult:
    """Take a snapshot (an image, kept as an artifact)."""
    return ToolResult(content=(ImageBlock.from_bytes(label.encode() * 4000, "image/png"),))


@resource("notes://{topic}", mime_type="text/plain", completions={"topic": ["alpha", "beta"]})
def note(topic: str) -> str:
    """A note on a topic."""
    return f"note on {topic}"


@prompt
def greet(name: str) -> str:
    """Greet someone.

    Args:
        name: Who to greet.
    """
    return f"Hello {name}"


def _rpc(http: TestClient, token: str, method: str, **params: Any) -> dict[str, Any]:
    answer = http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": method,
                                     "params": params},
                       headers={"Authorization": f"Bearer {token}",
                                "Accept": "application/json, text/event-stream",
                                "MCP-Protocol-Version": "2025-11-25"})
    body = answer.text.rpartition("data: ")[2] if "data: " in answer.text else answer.text
    return dict(json.loads(body))


def test_a_client_reads_its_own_artifacts_and_never_another_clients(tmp_path: Path) -> None:
    store = MemoryBlobStore()
    invoker = ToolInvoker([snapshot], artifact_store=store)
    clients = ClientTokens(tmp_path / "db.sqlite")
    alice, bob = clients.add("alice"), clients.add("bob")
    app = create_app(invoker, token="operator-token-0123456789", clients=clients,
                     offers=[note, greet])
    with TestClient(app, base_url="http://127.0.0.1") as http:
        _rpc(http, alice, "tools/call", name="snapshot", arguments={"label": "alice"})
        mine = _rpc(http, alice, "resources/list")["result"]["resources"]
        artifact = next(r["uri"] for r in mine if r["uri"].startswith("toolkeeper://artifact/"))
        read = _rpc(http, alice, "resources/read", uri=artifact)["result"]["contents"][0]
        theirs = _rpc(http, bob, "resources/list")["result"]["resources"]
        refused = _rpc(http, bob, "resources/read", uri=artifact)
        template = _rpc(http, bob, "resources/read", uri="notes://tea")["result"]["contents"]
        completed = _rpc(http, bob, "completion/complete",
                         ref={"type": "ref/resource", "uri": "notes://{topic}"},
                         argument={"name": "topic", "value": "al"})["result"]["completion"]
        greeting = _rpc(http, bob, "prompts/get", name="greet", arguments={"name": "Ada"})
    assert read["mimeType"] == "image/png" and len(read["blob"]) > 1000
    assert not any(r["uri"].startswith("toolkeeper://artifact/") for r in theirs)
    assert refused["error"]["code"] == -32002 and "no resource" in refused["error"]["message"]
    assert template == [{"uri": "notes://tea", "mimeType": "text/plain", "text": "note on tea"}]
    assert completed["values"] == ["alpha"]
    assert greeting["result"]["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "Hello Ada"}}]


@tool
async def interview(ctx: Any) -> str:
    """Ask the user's name, then the model for a greeting."""
    await ctx.log("asking")
    answer = await ctx.elicit("Your name?", {"type": "object", "properties": {
        "name": {"type": "string"}}}, key="name")
    return str(await ctx.sample(f"Greet {answer['content']['name']}", max_tokens=20))


async def _sample(context: Any, params: Any) -> Any:
    import mcp_types as types

    asked = params.messages[0].content.text
    return types.CreateMessageResult(role="assistant", model="m",
                                     content=types.TextContent(text=f"model: {asked}"))


async def _elicit(context: Any, params: Any) -> Any:
    import mcp_types as types

    return types.ElicitResult(action="accept", content={"name": "Ada"})


async def test_a_tool_asks_its_client_on_either_wire_and_the_audit_log_records_each_ask(
        tmp_path: Path) -> None:
    from mcp import Client

    from toolkeeper.invoke.audit import SqliteAuditLog
    from toolkeeper.mcp.server import mcp_server

    audit = SqliteAuditLog(tmp_path / "audit.db")
    server = mcp_server(ToolInvoker([interview], audit=audit))
    said = {}
    for mode in ("legacy", "2026-07-28"):  # a request on the stream; input_required rounds
        async with Client(server, mode=mode, sampling_callback=_sample,
                          elicitation_callback=_elicit) as client:
            said[mode] = (await client.call_tool("interview", {})).content[0].text  # type: ignore[union-attr]
    assert said == {"legacy": "model: Greet Ada", "2026-07-28": "model: Greet Ada"}
    asked = [e.status for e in audit.query() if e.status in ("sampling", "elicitation")]
    # legacy: one of each; 2026-07-28: the name in round 1, the greeting in round 2
    assert sorted(asked) == ["elicitation", "elicitation", "sampling", "sampling"]


async def test_a_client_without_the_capability_gets_32021_and_a_library_run_a_clear_error(
        ) -> None:
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    from toolkeeper.mcp.server import mcp_server

    async with Client(mcp_server(ToolInvoker([interview])), mode="legacy") as client:
        try:
            await client.call_tool("interview", {})
        except MCPError as exc:
            refused = exc
    assert refused.error.code == -32021
    assert refused.error.data == {"requiredCapabilities": {"elicitation": {}}}
    with pytest.warns(DeprecationWarning, match="error string"):  # as a library run sees it
        result = await interview.arun({})
    assert "ctx.elicit() needs an MCP client in front of the call" in str(result)


@tool(risk="high")
def wipe(path: str) -> str:
    """Wipe a folder."""
    return f"wiped {path}"


async def test_a_call_that_waits_for_approval_and_is_denied_tells_its_client() -> None:
    from mcp import Client

    from toolkeeper.approval.handlers import CallbackApprovalHandler
    from toolkeeper.mcp.server import mcp_server

    heard: list[tuple[str, str]] = []

    async def log(params: Any) -> None:
        heard.append((params.level, params.data))

    server = mcp_server(ToolInvoker([wipe], CallbackApprovalHandler(lambda _request: False)))
    async with Client(server, mode="legacy", logging_callback=log) as client:
        result = await client.call_tool("wipe", {"path": "/tmp/x"})
    assert result.is_error
    (waited, waited_line), (denied, denied_line) = heard
    assert waited == "notice" and waited_line.startswith("wipe: waiting for approval (request ")
    assert "toolkeeper approvals decide" in waited_line
    assert denied == "warning" and denied_line.startswith("wipe: ")
