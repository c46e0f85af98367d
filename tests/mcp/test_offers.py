"""Resources, prompts, completion and logging as clients meet them: artifacts are scoped to
the client whose calls stored them, through the real HTTP face with two client tokens."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
