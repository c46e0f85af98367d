"""docs/server.md's example of resources, prompts and a tool asking the client runs as
written: served by the MCP face to the official client, in process."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import Client

from toolkeeper import Prompt, Resource, Tool, ToolInvoker
from toolkeeper.mcp.server import mcp_server

DOC = Path(__file__).resolve().parents[2] / "docs" / "server.md"


def _example() -> dict[str, Any]:
    section = DOC.read_text().split("## Resources, prompts, and asking the client")[1]
    (code,) = re.findall(r"```python\n(.*?)```", section.split("\n## ")[0], flags=re.S)
    scope: dict[str, Any] = {"__name__": "notes"}
    exec(compile(code, str(DOC), "exec"), scope)
    return scope


async def test_the_documented_module_serves_resources_prompts_and_asks_the_client() -> None:
    module = _example()
    tools = [v for v in module.values() if isinstance(v, Tool)]
    offers = [v for v in module.values() if isinstance(v, Resource | Prompt)]

    async def sample(context: Any, params: types.CreateMessageRequestParams
                     ) -> types.CreateMessageResult:
        return types.CreateMessageResult(role="assistant", model="m",
                                         content=types.TextContent(text="A short summary."))

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"keep": True})

    server = mcp_server(ToolInvoker(tools), offers=offers)
    async with Client(server, mode="legacy", sampling_callback=sample,
                      elicitation_callback=elicit) as client:
        note = (await client.read_resource("notes://billing")).contents[0]
        drafted = await client.get_prompt("reply", {"customer": "Ada"})
        completed = await client.complete(
            types.ResourceTemplateReference(uri="notes://{topic}"),
            {"name": "topic", "value": "out"})
        summary = await client.call_tool("summarize", {"text": "a long text"})
    assert note.text == "Notes on billing: nothing yet."  # type: ignore[union-attr]
    assert [m.content.type for m in drafted.messages] == ["text", "resource", "image"]
    assert drafted.messages[0].content.text == "Write a friendly reply to Ada."  # type: ignore[union-attr]
    assert completed.completion.values == ["outages"]
    assert summary.content[0].text == "A short summary."  # type: ignore[union-attr]
