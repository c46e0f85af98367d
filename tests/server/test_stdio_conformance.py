"""The conformance suite's server checks that matter, over stdio (the suite has no stdio mode
for servers): ``toolkeeper serve --stdio`` with the conformance tools module, driven by the
official MCP client's stdio transport on the 2025-11-25 wire. Sampling and elicitation, which
stateless HTTP cannot carry, work here: a stdio connection is the session."""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "tests" / "mcp" / "conformance" / "conformance_tools.py"
pytestmark = [pytest.mark.anyio,  # the 2025-11-25 wire on purpose: its methods are deprecated later
              pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")]


async def _sample(context: Any, params: types.CreateMessageRequestParams
                  ) -> types.CreateMessageResult:
    asked = params.messages[0].content.text  # type: ignore[union-attr]
    return types.CreateMessageResult(role="assistant", model="echo",
                                     content=types.TextContent(text=f"echo {asked}"))


async def _elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    schema = getattr(params, "requested_schema", {})
    return types.ElicitResult(action="accept", content={
        name: field.get("default", "yes") for name, field in schema["properties"].items()})


async def test_the_suites_server_checks_pass_over_stdio(tmp_path: Path) -> None:
    logged: list[Any] = []
    moves: list[float] = []

    async def heard(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params.data)

    async def moved(progress: float, total: float | None, message: str | None) -> None:
        moves.append(progress)

    launch = StdioServerParameters(
        command=sys.executable, cwd=str(tmp_path),
        args=["-m", "toolkeeper.cli", "serve", "--stdio", str(TOOLS), "--no-builtins",
              "--state-dir", str(tmp_path / "state")],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)})
    with (tmp_path / "server.log").open("w") as err:
        async with Client(stdio_client(launch, errlog=err), mode="legacy",
                          sampling_callback=_sample, elicitation_callback=_elicit,
                          logging_callback=heard) as client:
            info = client.server_info
            await client.send_ping()
            tools = {t.name: t for t in (await client.list_tools()).tools}

            async def call(name: str, **arguments: Any) -> types.CallToolResult:
                return await client.call_tool(name, arguments, progress_callback=moved)

            text = await call("test_simple_text")
            image = await call("test_image_content")
            embedded = await call("test_embedded_resource")
            failed = await call("test_error_handling")
            await client.set_logging_level("info")
            await call("test_tool_with_logging")
            await call("test_tool_with_progress")
            sampled = await call("test_sampling", prompt="What is 2+2?")
            elicited = await call("test_elicitation", message="Your name?")
            defaults = await call("test_elicitation_sep1034_defaults")
            resources = {r.uri for r in (await client.list_resources()).resources}
            static = (await client.read_resource("test://static-text")).contents[0]
            binary = (await client.read_resource("test://static-binary")).contents[0]
            templated = (await client.read_resource("test://template/42/data")).contents[0]
            templates = (await client.list_resource_templates()).resource_templates
            await client.subscribe_resource("test://watched-resource")
            await client.unsubscribe_resource("test://watched-resource")
            prompts = {p.name: p for p in (await client.list_prompts()).prompts}
            with_args = await client.get_prompt("test_prompt_with_arguments",
                                                {"arg1": "a", "arg2": "b"})
            with_image = await client.get_prompt("test_prompt_with_image")
            with_resource = await client.get_prompt("test_prompt_with_embedded_resource",
                                                    {"resourceUri": "test://x"})
            completed = await client.complete(
                types.PromptReference(name="test_prompt_with_arguments"),
                {"name": "arg1", "value": "al"})
    assert info is not None and info.name == "toolkeeper" and info.version
    schema = tools["json_schema_2020_12_tool"].input_schema
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["properties"]["address"] == {"$ref": "#/$defs/address"} and "$defs" in schema
    assert text.content[0].text == "This is a simple text response for testing."  # type: ignore[union-attr]
    assert image.content[0].type == "image" and embedded.content[0].type == "resource"
    assert failed.is_error
    assert logged == ["Tool execution started", "Tool processing data",
                      "Tool execution completed"]
    assert moves == [0, 50, 100]
    assert sampled.content[0].text == "LLM response: echo What is 2+2?"  # type: ignore[union-attr]
    assert json.loads(elicited.content[0].text.split("content=")[1]) == {  # type: ignore[union-attr]
        "response": "yes"}
    assert "action=accept" in defaults.content[0].text  # type: ignore[union-attr]
    assert {"test://static-text", "test://static-binary", "test://watched-resource"} <= resources
    assert static.text == "This is the content of the static text resource."  # type: ignore[union-attr]
    assert base64.b64decode(binary.blob)[:4] == b"\x89PNG"  # type: ignore[union-attr]
    assert json.loads(templated.text)["id"] == "42"  # type: ignore[union-attr]
    assert [t.uri_template for t in templates] == ["test://template/{id}/data"]
    assert [a.name for a in prompts["test_prompt_with_arguments"].arguments or []] == [
        "arg1", "arg2"]
    assert with_args.messages[0].content.text == "Prompt with arguments: arg1='a', arg2='b'"  # type: ignore[union-attr]
    assert [m.content.type for m in with_image.messages] == ["image", "text"]
    assert with_resource.messages[0].content.resource.uri == "test://x"  # type: ignore[union-attr]
    assert completed.completion.values == ["alpha"]
    log = (tmp_path / "server.log").read_text()
    assert "Traceback" not in log
