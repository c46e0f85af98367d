"""The tools the official MCP conformance suite calls, written the way a user writes a tools
module for ``toolkeeper serve``: ``toolkeeper serve conformance_tools.py``.

The suite names the tools, prompts and resources it exercises (``test_simple_text``,
``test://static-text``...); what each returns is what its scenario checks."""

from __future__ import annotations

from toolkeeper import (
    AudioBlock,
    FileBlock,
    ImageBlock,
    TextBlock,
    Tool,
    ToolContext,
    ToolResult,
    tool,
)

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
