"""Behaviours the published registry Tool API documents, held against toolkeeper's Tool."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any, cast

import pytest

from toolkeeper import SchemaError, Tool
from toolkeeper.tools.rawschema import SchemaWarning

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def divide(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b


def test_a_top_level_that_is_not_an_object_becomes_one_and_says_where() -> None:
    with pytest.warns(SchemaWarning, match=r"tool 'bad' parameters: the top level must be an "
                                           r"object schema of named arguments, got type 'string'"):
        bad = Tool(name="bad", description="Bad.", parameters={"type": "string"},
                   callable=lambda: "ran")
    assert bad.parameters == {"type": "object", "properties": {}}
    for api_format, key in (("openai-chat", "parameters"), ("anthropic", "input_schema"),
                            ("mcp", "inputSchema")):
        declared: Any = bad.get_schema(api_format)
        assert declared.get("function", declared)[key] == {"type": "object", "properties": {}}
    assert bad.run_raw({}) == "ran"


def test_run_swallowing_an_exception_is_deprecated_and_run_raw_raises() -> None:
    tool = Tool.from_function(divide)
    with pytest.warns(DeprecationWarning, match="call run_raw"):
        assert str(tool.run({"a": 10, "b": 0})).startswith("Error executing divide: ")
    with pytest.warns(DeprecationWarning, match="call arun_raw"):
        assert str(asyncio.run(tool.arun({"a": 1, "b": 0}))).endswith("division by zero")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tool.run({"a": 10, "b": 4}) == 2.5  # no warning when nothing is swallowed
    with pytest.raises(ZeroDivisionError):
        tool.run_raw({"a": 10, "b": 0})


def test_describe_and_get_json_schema_are_deprecated_aliases_of_get_schema() -> None:
    tool = Tool.from_function(divide)
    for alias in (tool.describe, tool.get_json_schema):
        with pytest.warns(DeprecationWarning, match="use get_schema"):
            assert alias("anthropic") == tool.get_schema("anthropic")
        with pytest.warns(DeprecationWarning, match="use get_schema"):
            assert alias() == tool.get_schema("openai-chat")


def test_from_function_generates_the_parameters_model_and_keeps_the_method_name() -> None:
    tool = Tool.from_function(divide)
    model = tool.parameters_model
    assert model is not None and set(model.model_fields) == {"a", "b"}
    assert model(a="3", b=2).model_dump()["a"] == 3.0
    assert tool.method_name == "divide" and tool.namespace is None
    assert tool.qualified_name == "divide"
    named = Tool.from_function(lambda a, b: a * b, name="multiply")
    assert named.method_name == "multiply"
    named.update_namespace("math_operations")
    assert (named.name, named.method_name) == ("math_operations-multiply", "multiply")
    raw = Tool(name="raw", parameters={"type": "object", "properties": {}}, callable=dict)
    assert raw.parameters_model is None


def test_get_schema_takes_the_documented_keyword_and_defaults_to_openai_chat() -> None:
    tool = Tool.from_function(divide)
    assert tool.get_schema() == tool.get_schema("openai-chat")
    augmented: Any = tool.get_schema("openai-chat", _think_augment=True)
    assert "toolcall_reason" in augmented["function"]["parameters"]["properties"]
    assert "toolcall_reason" not in cast(Any, tool.get_schema())["function"]["parameters"]["properties"]


def test_the_schema_dialect_key_is_stripped_from_every_declaration_but_mcps() -> None:
    tool = Tool(name="raw", description="Raw.", callable=lambda x: x, parameters={
        "$schema": DIALECT, "type": "object", "properties": {"x": {"type": "integer"}}})
    assert tool.parameters["$schema"] == DIALECT  # the definition keeps what it was given
    for api_format in ("openai-chat", "openai-responses", "anthropic", "gemini"):
        assert "$schema" not in str(tool.get_schema(api_format)), api_format
    # MCP's dialect is JSON Schema 2020-12: the schema goes as written.
    assert cast(Any, tool.get_schema("mcp"))["inputSchema"]["$schema"] == DIALECT


def test_an_unnamed_lambda_is_both_a_schema_error_and_a_value_error() -> None:
    with pytest.raises(ValueError, match="lambda"):
        Tool.from_function(lambda x: x)
    with pytest.raises(SchemaError):
        Tool.from_function(lambda x: x)
