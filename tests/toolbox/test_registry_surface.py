"""The registry library's surface, as its programs use it: ``from toolkeeper import ToolRegistry,
Tool`` (those programs import them from the library's own package), ``register``, ``list_tools``,
``get_schemas(api_format, think_augment=...)``, ``execute_tool`` and ``execute_tool_calls``;
``ToolMetadata.locality`` and ``source_detail``."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
from pydantic import ValidationError

from toolkeeper import Tool, Toolbox, ToolCall, ToolMetadata, ToolRegistry, UsageError, export

REASON = "toolcall_reason"


def calculate_area(length: float, width: float) -> float:
    """Calculate the area of a rectangle."""
    return length * width


def area_tool() -> Tool:
    # the registry library's "basic tool creation" example, as written
    return Tool(
        name="calculate_area",
        description="Calculate the area of a rectangle",
        parameters={
            "type": "object",
            "properties": {
                "length": {"type": "number", "description": "Length of rectangle"},
                "width": {"type": "number", "description": "Width of rectangle"}
            },
            "required": ["length", "width"]
        },
        callable=calculate_area,
        is_async=False
    )


def properties(declaration: Any, key: str = "parameters") -> Any:
    body = declaration.get("function", declaration)
    return body[key]["properties"]


def test_the_registry_integration_example_runs_as_written() -> None:
    registry = ToolRegistry()

    # Register tool with registry
    registry.register(area_tool())

    # Execute tool through registry
    result = registry.execute_tool("calculate_area", length=3, width=4)
    assert result == 12.0
    assert registry.list_tools() == ["calculate_area"]


def test_get_schemas_offers_toolcall_reason_by_default_and_not_when_told() -> None:
    registry = ToolRegistry()
    registry.register(area_tool())
    (default,) = registry.get_schemas("openai-chat")
    assert list(properties(default)) == ["length", "width", REASON]
    assert REASON not in properties(default)["length"]
    assert cast(Any, default)["function"]["parameters"]["required"] == ["length", "width"]
    (without,) = registry.get_schemas("openai-chat", think_augment=False)
    assert list(properties(without)) == ["length", "width"]
    (anthropic,) = registry.get_schemas("anthropic")
    assert REASON in properties(anthropic, "input_schema")
    registry.disable_think_augment()
    assert REASON not in properties(registry.get_schemas()[0])
    assert REASON in properties(registry.get_schemas(think_augment=True)[0])
    registry.enable_think_augment()
    assert REASON in properties(registry.get_schemas()[0])
    quiet = ToolRegistry([area_tool()], think_augment=False)
    assert REASON not in properties(quiet.get_schemas()[0])


def test_a_tools_own_setting_wins_over_the_registrys() -> None:
    never = Tool.from_function(calculate_area, name="never",
                               metadata=ToolMetadata(think_augment=False))
    always = Tool.from_function(calculate_area, name="always",
                                metadata=ToolMetadata(think_augment=True))
    registry = ToolRegistry([never, always])
    by_name = {d["function"]["name"]: d for d in cast(Any, registry.get_schemas())}
    assert REASON not in properties(by_name["never"]) and REASON in properties(by_name["always"])
    off = {d["function"]["name"]: d for d in cast(Any, registry.get_schemas(think_augment=False))}
    assert REASON in properties(off["always"])


def test_the_default_belongs_to_the_registry_name_only() -> None:
    # a Toolbox, export() and Tool.get_schema keep sending what they always sent
    tool = area_tool()
    assert REASON not in properties(Toolbox([tool]).schemas()[0])
    assert REASON not in properties(export([tool], "openai-chat").declarations[0])
    assert REASON not in properties(tool.get_schema())
    assert REASON not in tool.parameters["properties"]


def test_execute_tool_calls_strips_the_reason_and_truncates_to_max_result_size() -> None:
    registry = ToolRegistry()
    registry.register(area_tool())
    registry.register(Tool.from_function(lambda n: "x" * n, name="long_text",
                                         metadata=ToolMetadata(max_result_size=40)))
    tool_calls = [
        {"id": "call_1", "type": "function", "function": {
            "name": "calculate_area",
            "arguments": json.dumps({"length": 2, "width": 5, REASON: "the user asked"})}},
        {"id": "call_2", "type": "function", "function": {
            "name": "long_text", "arguments": json.dumps({"n": 500})}},
    ]
    messages = registry.execute_tool_calls(tool_calls, "openai-chat")
    assert messages[0] == {"role": "tool", "tool_call_id": "call_1", "content": "10"}
    truncated = messages[1]["content"]
    assert "characters truncated" in truncated and truncated.count("x") <= 40  # type: ignore[operator, union-attr]
    results = registry.execute_tool_calls(
        [ToolCall(id="c", name="calculate_area", arguments={"length": 1, "width": 2})])
    assert [r.text for r in results] == ["2"]  # type: ignore[union-attr]


def test_metadata_locality_and_source_detail_take_the_registry_librarys_values() -> None:
    assert (ToolMetadata().locality, ToolMetadata().source_detail) == ("any", "")
    for where in ("local", "remote", "any"):
        assert ToolMetadata(locality=where).locality == where
    meta = ToolMetadata(source="mcp", source_detail="stdio:weather-server")
    assert meta.source_detail == "stdio:weather-server"
    with pytest.raises(ValidationError, match="locality"):
        ToolMetadata(locality="elsewhere")


def test_call_dicts_without_api_format_are_one_clear_error_naming_the_fix() -> None:
    registry = ToolRegistry([area_tool()])
    openai_call = {"id": "call_1", "type": "function", "function": {
        "name": "calculate_area", "arguments": '{"length": 2, "width": 5}'}}
    with pytest.raises(UsageError) as raised:
        registry.execute_tool_calls([openai_call])
    message = str(raised.value)
    assert "item 0 is a dict" in message and "api_format" in message
    assert "toolkeeper.compat.toolregistry" in message  # where toolregistry's behaviour lives
    assert registry.execute_tool_calls([openai_call], "openai-chat")[0]["content"] == "10"  # type: ignore[index]


def test_without_a_handler_sensitive_calls_run_and_high_ones_are_denied_as_documented() -> None:
    def lookup(q: str) -> str:
        """Look up."""
        return q

    box = Toolbox([Tool.from_function(lookup, risk="sensitive"),
                   Tool.from_function(lookup, name="wipe", risk="high")])
    ran, denied = box.execute_tool_calls([ToolCall(id="1", name="lookup", arguments={"q": "a"}),
                                          ToolCall(id="2", name="wipe", arguments={"q": "b"})])
    assert (ran.is_error, denied.is_error) == (False, True)  # type: ignore[union-attr]
    doc = " ".join((Toolbox.execute_tool_calls.__doc__ or "").split())
    assert "SENSITIVE calls run" in doc and "HIGH and CRITICAL ones are denied" in doc
