"""Deferred tools are found through tool_search, which returns declarations and loads them."""

from __future__ import annotations

from typing import Any, cast

import pytest
from anthropic.types import ToolParam
from openai.types.responses import FunctionToolParam, ToolSearchToolParam
from pydantic import TypeAdapter

from toolkeeper import Tool, ToolMetadata, UnknownToolError, UsageError
from toolkeeper.toolbox import Toolbox, native_deferred_tools

DEFER = ToolMetadata(defer_loading=True)


def catalog() -> Toolbox:
    return Toolbox([
        Tool.from_function(lambda city: "sunny", name="get_weather",
                           description="Get the weather for a city"),
        Tool.from_function(lambda amount, to: amount, name="convert_currency",
                           description="Convert an amount of money to another currency",
                           metadata=DEFER),
        Tool.from_function(lambda query: [], name="search_flights",
                           description="Search for flights between two airports", metadata=DEFER),
    ])


def test_deferred_tools_are_hidden_until_tool_search_finds_them() -> None:
    view = catalog().with_tool_search()
    assert [d["function"]["name"] for d in cast(Any, view.schemas())] == ["tool_search", "get_weather"]
    with pytest.raises(UnknownToolError):
        view.execute_tool("convert_currency", amount=1, to="EUR")
    found: Any = view.execute_tool("tool_search", query="convert money to euros")
    assert [d["function"]["name"] for d in found["tools"]] == ["convert_currency"]
    assert "convert_currency" in [d["function"]["name"] for d in cast(Any, view.schemas())]
    assert view.execute_tool("convert_currency", amount=5, to="EUR") == 5
    assert "search_flights" not in view.names()


def test_tool_search_answers_in_the_callers_wire_format() -> None:
    from toolkeeper.toolbox import DeferredView

    view = DeferredView(catalog(), api_format="anthropic")
    found: Any = view.execute_tool("tool_search", query="flights between airports")
    assert found["tools"][0]["name"] == "search_flights"
    assert "input_schema" in found["tools"][0]


def test_native_deferral_for_anthropic_and_openai_responses() -> None:
    anthropic_tools = native_deferred_tools(catalog(), "anthropic")
    assert anthropic_tools[-1] == {"type": "tool_search_tool_bm25_20251119",
                                   "name": "tool_search_tool_bm25"}
    for declaration in anthropic_tools[:-1]:
        TypeAdapter(ToolParam).validate_python(declaration)
    assert [d.get("defer_loading", False) for d in anthropic_tools[:-1]] == [False, True, True]
    openai_tools = native_deferred_tools(catalog(), "openai-responses")
    TypeAdapter(ToolSearchToolParam).validate_python(openai_tools[-1])
    for declaration in openai_tools[:-1]:
        TypeAdapter(FunctionToolParam).validate_python(declaration)
    with pytest.raises(UsageError, match="with_tool_search"):
        native_deferred_tools(catalog(), "gemini")
