"""The tools the official MCP conformance suite calls, written the way a user writes a tools
module for ``toolkeeper serve``: ``toolkeeper serve conformance_tools.py``.

The suite names the tools, prompts and resources it exercises (``test_simple_text``,
``test://static-text``...); what each returns is what its scenario checks."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable
from typing import Annotated

from pydantic import Field

from toolkeeper import (
    AudioBlock,
    FileBlock,
    ImageBlock,
    TextBlock,
    Tool,
    ToolContext,
    ToolResult,
    prompt,
    resource,
    tool,
)
from toolkeeper.core.json import JsonObject, JsonValue

PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5E"
       "rkJggg==")
"""A 1×1 PNG, base64."""
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
"""A silent WAV, base64."""


@tool
def test_simple_text() -> str:
    """Answer with one text block."""
    return "This is a simple text response for testing."


@tool
def test_image_content() -> ToolResult:
    """Answer with an image."""
    return ToolResult(content=(ImageBlock(data=PNG, media_type="image/png"),))


@tool
def test_audio_content() -> ToolResult:
    """Answer with audio."""
    return ToolResult(content=(AudioBlock(data=WAV, media_type="audio/wav"),))


@tool
def test_embedded_resource() -> ToolResult:
    """Answer with an embedded text resource."""
    return ToolResult(content=(FileBlock(uri="test://embedded-resource", media_type="text/plain",
                                         text="This is an embedded resource content."),))


@tool
def test_multiple_content_types() -> ToolResult:
    """Answer with text, an image and an embedded resource."""
    return ToolResult(content=(
        TextBlock(text="Multiple content types test:"),
        ImageBlock(data=PNG, media_type="image/png"),
        FileBlock(uri="test://mixed-content-resource", media_type="application/json",
                  text='{"test": "data", "value": 123}'),
    ))


@tool
def test_error_handling() -> str:
    """Fail on purpose: the client gets an error result."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@tool
async def test_tool_with_progress(ctx: ToolContext) -> str:
    """Report progress three times, then answer."""
    for step in (0, 50, 100):
        await ctx.report_progress(step, 100, f"Completed step {step} of 100")
    return "progress reported"


ADDRESS_FORM = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}
"""A JSON Schema 2020-12 input schema with the keywords the suite checks are kept."""


def _name_of(**arguments: object) -> str:
    return f"received {sorted(arguments)}"


json_schema_2020_12_tool = Tool(
    name="json_schema_2020_12_tool", callable=_name_of, input_schema=ADDRESS_FORM,
    description="Take a contact form declared in JSON Schema 2020-12.")


@tool
async def test_tool_with_logging(ctx: ToolContext) -> str:
    """Log three lines to the client while working."""
    for line in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.log(line)
    return "Tool with logging executed successfully"


@tool
async def test_sampling(prompt: str, ctx: ToolContext) -> str:
    """Ask the client's model to answer ``prompt``."""
    return f"LLM response: {await ctx.sample(prompt, max_tokens=100)}"


@tool
async def test_elicitation(message: str, ctx: ToolContext) -> str:
    """Ask the client's user for a response."""
    answer = await ctx.elicit(message, {
        "type": "object", "properties": {"response": {"type": "string",
                                                      "description": "User's response"}},
        "required": ["response"]})
    return f"User response: action={answer['action']}, content={json.dumps(answer['content'])}"


@tool
async def test_elicitation_sep1034_defaults(ctx: ToolContext) -> str:
    """Ask for a form whose every field has a default."""
    answer = await ctx.elicit("Please provide user information", {"type": "object", "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {"type": "string", "description": "User status",
                   "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    }})
    return f"Elicitation result: action={answer['action']}"


@tool
async def test_elicitation_sep1330_enums(ctx: ToolContext) -> str:
    """Ask for a form with every kind of enum field."""
    titled: list[JsonValue] = [{"const": c, "title": t} for c, t in
              (("low", "Low Priority"), ("medium", "Medium Priority"), ("high", "High Priority"))]
    tags: list[JsonValue] = [{"const": c, "title": t} for c, t in
            (("feature", "New Feature"), ("bug", "Bug Fix"), ("docs", "Documentation"))]
    answer = await ctx.elicit("Please select values using different enum schema types", {
        "type": "object", "required": ["untitledSingle", "titledSingle", "untitledMulti",
                                       "titledMulti", "legacyEnum"],
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["active", "inactive", "pending"]},
            "titledSingle": {"type": "string", "oneOf": titled},
            "untitledMulti": {"type": "array", "items": {"type": "string",
                                                         "enum": ["read", "write", "execute"]}},
            "titledMulti": {"type": "array", "items": {"anyOf": tags}},
            "legacyEnum": {"type": "string", "enum": ["small", "medium", "large"],
                           "enumNames": ["Small Size", "Medium Size", "Large Size"]},
        }})
    return f"Elicitation completed: action={answer['action']}"


@resource("test://static-text", mime_type="text/plain")
def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@resource("test://static-binary", mime_type="image/png")
def static_binary() -> bytes:
    """A static binary resource (an image)."""
    return base64.b64decode(PNG)


@resource("test://template/{id}/data", mime_type="application/json",
          completions={"id": ["1", "2", "42"]})
def template_data(id: str) -> str:
    """The data of one item, by id."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@resource("test://watched-resource", mime_type="text/plain")
def watched() -> str:
    """A resource clients subscribe to."""
    return "Watched resource content"


@prompt
def test_simple_prompt() -> str:
    """A prompt without arguments."""
    return "This is a simple prompt for testing."


@prompt(completions={"arg1": ["alpha", "beta"]})
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with two arguments.

    Args:
        arg1: The first argument.
        arg2: The second argument.
    """
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@prompt
def test_prompt_with_embedded_resource(resourceUri: str) -> list[object]:
    """A prompt carrying a resource.

    Args:
        resourceUri: The URI of the resource to embed.
    """
    return [FileBlock(uri=resourceUri, media_type="text/plain",
                      text="Embedded resource content for testing."),
            "Please process the embedded resource above."]


@prompt
def test_prompt_with_image() -> list[object]:
    """A prompt carrying an image."""
    return [ImageBlock(data=PNG, media_type="image/png"), "Please analyze the image above."]


def _field(answer: JsonObject, name: str, default: str | None = None) -> JsonValue:
    """One field of an elicitation's answer (its default when the person declined)."""
    content = answer["content"]
    return content.get(name, default) if isinstance(content, dict) else default


NAME_FORM: JsonObject = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@tool
async def test_missing_capability(ctx: ToolContext) -> str:
    """Ask the client's model something (the client must declare sampling)."""
    return await ctx.sample("Say hello", max_tokens=20)


@tool
async def test_input_required_result_elicitation(ctx: ToolContext) -> str:
    """Ask the user's name, then greet them."""
    answer = await ctx.elicit("What is your name?", NAME_FORM, key="user_name")
    return f"Hello, {_field(answer, 'name', 'stranger')}!"


@tool
async def test_input_required_result_sampling(ctx: ToolContext) -> str:
    """Ask the client's model a question."""
    said = await ctx.sample("What is the capital of France?", max_tokens=100,
                            key="capital_question")
    return f"Model said: {said}"


@tool
async def test_input_required_result_list_roots(ctx: ToolContext) -> str:
    """Ask the client for its roots."""
    roots = await ctx.list_roots(key="client_roots")
    return f"Client exposed {len(roots)} root(s): " + ", ".join(str(r["uri"]) for r in roots)


@tool
async def test_input_required_result_request_state(ctx: ToolContext) -> str:
    """Ask for a confirmation across a round trip."""
    await ctx.elicit("Please confirm", {"type": "object", "properties": {
        "ok": {"type": "boolean"}}, "required": ["ok"]}, key="confirm")
    return "state-ok: confirmation received"


@tool
async def test_input_required_result_multiple_inputs(ctx: ToolContext) -> str:
    """Ask the user, the model and the roots at once."""
    await asyncio.gather(ctx.elicit("What is your name?", NAME_FORM, key="user_name"),
                         ctx.sample("Generate a greeting", max_tokens=50, key="greeting"),
                         ctx.list_roots(key="client_roots"))
    return "All inputs received."


@tool
async def test_input_required_result_multi_round(ctx: ToolContext) -> str:
    """Ask two questions, one after the other."""
    name = await ctx.elicit("Step 1: What is your name?", NAME_FORM, key="step1")
    color = await ctx.elicit("Step 2: What is your favorite color?", {
        "type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]},
        key="step2")
    return f"{_field(name, 'name')} likes {_field(color, 'color')}."


@tool
async def test_input_required_result_tampered_state(ctx: ToolContext) -> str:
    """Ask for a confirmation (its request state is sealed)."""
    await ctx.elicit("Please confirm", {"type": "object", "properties": {
        "ok": {"type": "boolean"}}, "required": ["ok"]}, key="confirm")
    return "state-ok"


@tool
async def test_input_required_result_capabilities(ctx: ToolContext) -> str:
    """Ask only what the client can answer."""
    asks: list[Awaitable[object]] = []
    if ctx.client_can("sampling"):
        asks.append(ctx.sample("Say hello", max_tokens=50, key="sample"))
    if ctx.client_can("elicitation"):
        asks.append(ctx.elicit("What is your name?", NAME_FORM, key="ask"))
    await asyncio.gather(*asks)
    return "asked what the client can answer"


@tool
def test_x_mcp_header(
    region: Annotated[str, Field(description="Mirrored into the Mcp-Param-Region header",
                                 json_schema_extra={"x-mcp-header": "Region"})] = "<none>",  # noqa: PT028
) -> str:
    """Answer with the region the client sent (in the body and the Mcp-Param-Region header)."""
    return f"region={region}"


@prompt
async def test_input_required_result_prompt(ctx: ToolContext) -> str:
    """A prompt that asks the user for its context first."""
    answer = await ctx.elicit("What context should the prompt use?", {
        "type": "object", "properties": {"context": {"type": "string"}},
        "required": ["context"]}, key="user_context")
    return f"Use the following context: {_field(answer, 'context', '?')}"


@tool
async def test_reconnection(ctx: ToolContext) -> str:
    """Log a line before and after a pause (the suite's SSE polling check calls it)."""
    await ctx.log("Before disconnect")
    await asyncio.sleep(0.2)
    await ctx.log("After reconnect")
    return "Reconnection test completed"


# The tasks extension's fixtures: tools that run as MCP tasks for a client that supports them.

CONFIRM_FORM: JsonObject = {"type": "object", "properties": {"confirm": {"type": "boolean"}},
                            "required": ["confirm"]}


@tool
def greet(name: str) -> str:
    """Greet someone (a plain call, never a task)."""
    return f"Hello, {name}!"


@tool(task_support="optional")
async def slow_compute(seconds: float = 1, label: str = "") -> str:
    """Compute for ``seconds`` seconds (a task for a client that supports them)."""
    await asyncio.sleep(seconds)
    return f"computed {label or 'it'} in {seconds} s"


@tool(task_support="required")
async def failing_job() -> str:
    """Work for a second, then fail (the tool's own error: the task completes with it)."""
    await asyncio.sleep(1)
    raise RuntimeError("the job failed")


@tool(task_support="optional")
async def protocol_error_job(ctx: ToolContext) -> str:
    """Ask the client for its roots, which the suite's client never declares: a protocol
    error (-32021), so the task fails."""
    roots = await ctx.list_roots(key="roots")
    return f"{len(roots)} roots"


@tool(task_support="optional")
async def confirm_delete(filename: str, ctx: ToolContext) -> str:
    """Ask the user to confirm before deleting ``filename`` (nothing is deleted)."""
    answer = await ctx.elicit(f"Delete {filename}?", CONFIRM_FORM, key="confirm")
    return f"deleted {filename}" if _field(answer, "confirm") is True else f"kept {filename}"


@tool(task_support="optional")
async def multi_input(ctx: ToolContext) -> str:
    """Ask two questions at once."""
    name, sure = await asyncio.gather(ctx.elicit("Your name?", NAME_FORM, key="name"),
                                      ctx.elicit("Sure?", CONFIRM_FORM, key="sure"))
    return f"{_field(name, 'name')} answered; sure: {_field(sure, 'confirm')}"


@tool(task_support="required", task_start="tool")
async def test_tool_with_task(ctx: ToolContext) -> str:
    """Ask the user's name as a plain call, then go on as a task that greets them."""
    answer = await ctx.elicit("What is your name?", NAME_FORM, key="user_name")
    await ctx.as_task()
    return f"Hello, {_field(answer, 'name', 'stranger')}!"
