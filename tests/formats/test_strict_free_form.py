"""A free-form object (any keys) keeps its meaning in strict mode: OpenAI's and Anthropic's strict
dialects can only close an object, and a closed object without properties accepts nothing but
``{}`` — so the tool is declared without strict mode and the error names the argument and the
fix, instead of being sent as an object that silently takes nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolkeeper import Tool, ToolInvoker, export

OPTIONS = {"type": "object", "description": "Any settings, as key/value pairs."}


def _configure(name: str, options: dict[str, Any] | None = None) -> str:
    return f"{name}: {sorted((options or {}).items())}"


def configure_tool(options_schema: dict[str, Any]) -> Tool:
    return Tool(name="configure", description="Configure a device.", callable=_configure,
                parameters={"type": "object",
                            "properties": {"name": {"type": "string"}, "options": options_schema},
                            "required": ["name"]})


def _function(declaration: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = declaration.get("function", declaration)
    return body


def _params(declaration: dict[str, Any]) -> dict[str, Any]:
    found = _function(declaration)
    return found.get("parameters") or found["input_schema"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("api_format", ["openai-chat", "openai-responses", "anthropic"])
@pytest.mark.parametrize("options", [
    OPTIONS,
    {"type": "object", "properties": {}},
    {"anyOf": [{"type": "object"}, {"type": "null"}]},
])
def test_a_free_form_object_is_never_closed_to_take_nothing(
        api_format: str, options: dict[str, Any]) -> None:
    exported = export([configure_tool(options)], api_format, strict=True)
    declaration = exported.declarations[0]
    assert _function(declaration).get("strict") in (None, False)  # declared without strict
    shown = _params(declaration)["properties"]["options"]
    assert '"additionalProperties": false' not in json.dumps(shown)  # still takes any keys
    (error,) = [p for p in exported.problems if p.severity == "error"]
    assert "parameters.options" in error.message
    assert "free-form object" in error.message and "declare its keys" in error.message


def test_a_list_of_free_form_objects_names_the_items() -> None:
    tool = configure_tool({"type": "array", "items": {"type": "object"}})
    (error,) = [p for p in tool.check("openai-chat", strict=True) if p.severity == "error"]
    assert "parameters.options.items" in error.message


def test_objects_with_declared_keys_and_tools_without_arguments_stay_strict() -> None:
    closed = configure_tool({"type": "object", "properties": {"volume": {"type": "integer"}}})
    ping = Tool(name="ping", description="Ping.", callable=lambda: "pong",
                parameters={"type": "object"})
    for tool in (closed, ping):
        declaration: Any = tool.get_schema("openai-chat", strict=True)
        assert declaration["function"]["strict"] is True
        assert all(p.severity != "error" for p in tool.check("openai-chat", strict=True))


def test_a_dict_argument_refuses_strict_with_the_fix_in_the_message() -> None:
    def tally(counts: dict[str, int]) -> int:
        """Sum counts."""
        return sum(counts.values())

    (error,) = [p for p in Tool.from_function(tally).check("openai-chat", strict=True)
                if p.severity == "error"]
    assert "parameters.counts" in error.message and "declare its keys" in error.message


def test_the_free_form_argument_arrives_whole_when_the_call_comes_back() -> None:
    tool = configure_tool(OPTIONS)
    exported = export([tool], "openai-chat", strict=True)
    response = {"choices": [{"message": {"role": "assistant", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {
            "name": "configure",
            "arguments": '{"name": "tv", "options": {"volume": 3, "input": "hdmi1"}}'}}]}}]}
    (call,) = exported.parse(response)
    assert call.arguments["options"] == {"volume": 3, "input": "hdmi1"}
    result = ToolInvoker([tool]).invoke_sync(call)
    assert result.status == "ok", result.text
    assert result.text == "tv: [('input', 'hdmi1'), ('volume', 3)]"
