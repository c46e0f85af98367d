"""``JsonValue`` and ``JsonObject`` are types pydantic can build a schema of: a tool returning a
JSON object declares its output, and its results are checked against it."""

from __future__ import annotations

import pytest

from toolkeeper import ToolCall, ToolInvoker, tool
from toolkeeper.core.json import JsonObject


@tool
def describe(name: str) -> JsonObject:
    """Describe a thing."""
    return {"name": name, "tags": ["a", {"nested": None}], "size": 1.5}


def test_a_tool_returning_a_json_object_declares_a_recursive_json_output_schema() -> None:
    schema = describe.spec.output_schema
    assert schema is not None and schema["type"] == "object"
    value: object = schema["$defs"]["JsonValue"]["anyOf"]  # type: ignore[index, call-overload]
    assert isinstance(value, list)
    assert {"type": "null"} in value and {"type": "string"} in value
    assert {"items": {"$ref": "#/$defs/JsonValue"}, "type": "array"} in value


@pytest.mark.anyio
async def test_a_call_of_it_returns_its_object_as_structured_content() -> None:
    invoker = ToolInvoker([describe])
    async with invoker.open_session() as session:
        result = await invoker.invoke(ToolCall(id="c1", name="describe",
                                               arguments={"name": "box"}), session=session)
    assert result.status == "ok", result
    assert result.result.structured_content == {
        "name": "box", "tags": ["a", {"nested": None}], "size": 1.5}
