"""Declarations validate against each provider SDK's own types, in normal and strict mode."""

from __future__ import annotations

import re
from typing import Any, cast

import mcp.types as mcp_types
import pytest
from anthropic.types import ToolParam
from google.genai import types as genai
from openai.types.chat import ChatCompletionToolParam
from openai.types.responses import FunctionToolParam
from pydantic import TypeAdapter

from toolkeeper import API_FORMATS, Tool, ToolMetadata, export

from .tools_zoo import RAW, zoo

NAME_RULES = {
    "openai-chat": r"[a-zA-Z0-9_-]{1,64}",
    "openai-responses": r"[a-zA-Z0-9_-]{1,64}",
    "anthropic": r"[a-zA-Z0-9_-]{1,128}",
    "gemini": r"[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}",
    "mcp": r"[A-Za-z0-9_.-]{1,128}",
}
OPENAI_STRICT = {"type", "properties", "required", "additionalProperties", "items", "enum",
                 "const", "anyOf", "description", "pattern", "format", "minimum", "maximum",
                 "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems",
                 "$ref", "$defs"}


def _name_of(declaration: dict[str, Any]) -> str:
    return str(declaration.get("function", declaration)["name"])


@pytest.mark.parametrize("api_format", ["openai-chat", "openai-responses", "anthropic", "gemini",
                                        "mcp"])
def test_wire_names_fit_each_provider(api_format: str) -> None:
    exported = export(zoo(), api_format)
    for declaration in exported.declarations:
        assert re.fullmatch(NAME_RULES[api_format], _name_of(declaration)), declaration
    assert exported.names.name(exported.names.wire(RAW.name)) == RAW.name


def test_openai_chat_declarations_validate_with_the_sdk() -> None:
    adapter = TypeAdapter(ChatCompletionToolParam)
    for strict in (False, True):
        for declaration in export(zoo(), "openai-chat", strict=strict).declarations:
            adapter.validate_python(declaration)


def test_openai_responses_declarations_are_explicit_about_strict() -> None:
    adapter = TypeAdapter(FunctionToolParam)
    for declaration in export(zoo(), "openai-responses").declarations:
        adapter.validate_python(declaration)
        assert declaration["strict"] is False  # the Responses API defaults strict to true


def test_anthropic_declarations_validate_with_the_sdk() -> None:
    adapter = TypeAdapter(ToolParam)
    for declaration in export(zoo(), "anthropic").declarations:
        adapter.validate_python(declaration)
        assert cast(Any, declaration)["input_schema"]["type"] == "object"


def test_gemini_declarations_validate_with_the_sdk_schema_model() -> None:
    exported = export(zoo(), "gemini")
    genai.Tool.model_validate(exported.tools[0])
    for declaration in exported.declarations:
        genai.FunctionDeclaration.model_validate(declaration)
        if "parameters" in declaration:
            genai.Schema.model_validate(declaration["parameters"])


def test_gemini_no_argument_function_has_no_empty_object() -> None:
    declaration = next(d for d in export(zoo(), "gemini").declarations if d["name"] == "no_args")
    assert "parameters" not in declaration


def test_mcp_declarations_validate_with_the_sdk() -> None:
    for declaration in export(zoo(), "mcp").declarations:
        tool = mcp_types.Tool.model_validate(declaration)
        assert tool.input_schema["type"] == "object"
    raw = RAW.get_schema("mcp")
    assert raw["annotations"] == {"title": "Weird", "readOnlyHint": True}
    assert raw["title"] == "Weird"


def test_every_format_declares_every_zoo_tool() -> None:
    for api_format in API_FORMATS:
        for tool in zoo():
            assert tool.get_schema(api_format)


def _walk(node: Any, path: str = "$") -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        out.append((path, node))
        for key, value in node.get("properties", {}).items():
            out.extend(_walk(value, f"{path}.{key}"))
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                out.extend(_walk(node[key], f"{path}.{key}"))
        for i, sub in enumerate(node.get("anyOf", [])):
            out.extend(_walk(sub, f"{path}.anyOf[{i}]"))
    return out


@pytest.mark.parametrize("api_format", ["openai-chat", "openai-responses", "anthropic"])
def test_strict_declarations_obey_the_strict_rules(api_format: str) -> None:
    exported = export(zoo(), api_format, strict=True)
    strict_count = 0
    for declaration in exported.declarations:
        body: Any = declaration.get("function", declaration)
        schema = body.get("parameters") or body.get("input_schema")
        if not body.get("strict"):
            continue
        strict_count += 1
        for path, node in _walk(schema):
            assert set(node) <= OPENAI_STRICT, (path, set(node) - OPENAI_STRICT)
            if node.get("type") == "object":
                assert node["additionalProperties"] is False, path
                assert set(node["required"]) == set(node["properties"]), path
    names = {p.tool for p in exported.problems if p.severity == "error"}
    assert names == {"open_map", "recursive"}
    assert strict_count == len(exported.declarations) - 2


def test_strict_mode_moves_defaults_and_constraints_into_descriptions() -> None:
    t = next(t for t in zoo() if t.name == "constrained")
    props = cast(Any, t.get_schema("anthropic", strict=True))["input_schema"]["properties"]
    assert props["count"]["type"] == ["integer", "null"]
    assert "Default: 1." in props["count"]["description"]
    assert "Constraint: minimum 1." in props["count"]["description"]
    assert "maximum" not in props["count"]
    openai_props = cast(Any, t.get_schema("openai-chat", strict=True))["function"]["parameters"]["properties"]
    assert openai_props["count"]["minimum"] == 1  # OpenAI strict keeps numeric bounds


def test_strict_request_that_cannot_be_honoured_falls_back_and_says_why() -> None:
    t = next(t for t in zoo() if t.name == "open_map")
    declaration: Any = t.get_schema("openai-chat", strict=True)
    assert "strict" not in declaration["function"]
    problems = t.check("openai-chat", strict=True)
    assert any(p.severity == "error" and "strict mode is not possible" in p.message
               for p in problems)


def test_gemini_shows_int_enums_as_strings_and_calls_convert_back() -> None:
    t = next(t for t in zoo() if t.name == "nested")
    props = cast(Any, t.get_schema("gemini"))["parameters"]["properties"]
    assert props["priority"]["enum"] == ["1", "2"] and props["priority"]["type"] == "string"
    assert props["tags"]["nullable"] is True
    kwargs = t.validate_arguments({"address": {"street": "s", "city": "c"}, "priority": "2"})
    assert kwargs["priority"] == 2


def test_refs_are_inlined_except_recursion() -> None:
    nested = next(t for t in zoo() if t.name == "nested")
    params = cast(Any, nested.get_schema("openai-chat"))["function"]["parameters"]
    assert "$defs" not in params and "$ref" not in str(params)
    assert params["properties"]["address"]["properties"]["city"]["description"] == "City name."
    recursive = next(t for t in zoo() if t.name == "recursive")
    assert "$defs" in cast(Any, recursive.get_schema("mcp"))["inputSchema"]
    gemini = recursive.get_schema("gemini")["parameters"]
    assert "$ref" not in str(gemini)
    assert any(p.severity == "warning" and "recursive" in p.message
               for p in recursive.check("gemini"))


def test_think_augment_adds_the_reason_to_the_declaration_only() -> None:
    t = Tool.from_function(lambda q: q, name="echo")
    declaration: Any = t.get_schema("openai-chat", think_augment=True)
    assert "toolcall_reason" in declaration["function"]["parameters"]["properties"]
    assert "toolcall_reason" not in t.parameters["properties"]
    assert t.run_raw({"q": "x", "toolcall_reason": "because"}) == "x"


def test_declarations_are_cached() -> None:
    t = zoo()[0]
    assert t.get_schema("anthropic") is t.get_schema("anthropic")


def test_mcp_keeps_a_2020_12_schema_as_written_and_the_others_keep_their_projections() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
        "$defs": {"address": {"$anchor": "addressDef", "type": "object",
                              "properties": {"city": {"type": "string"}}}},
        "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
        "if": {"properties": {"name": {"const": "x"}}}, "then": {"required": ["address"]},
    }
    form = Tool(name="form", description="Fill a form.", input_schema=schema,
                callable=lambda **kw: "ok")
    assert form.get_schema("mcp")["inputSchema"] == schema
    nested = next(t for t in zoo() if t.name == "nested")
    assert nested.get_schema("mcp")["inputSchema"] == nested.parameters
    for api_format in ("openai-chat", "anthropic", "gemini"):
        projected = str(form.get_schema(api_format))
        assert "$schema" not in projected and "$ref" not in projected, api_format


def test_an_mcp_declaration_says_whether_the_tool_runs_as_a_task() -> None:
    def render(frames: int) -> str:
        """Render some frames."""
        return str(frames)

    tools = [Tool.from_function(render, name=name, metadata=ToolMetadata(task_support=support))
             for name, support in (("plain", "forbidden"), ("maybe", "optional"),
                                   ("only", "required"))]
    declared = {d["name"]: d for d in export(tools, "mcp").declarations}
    assert "execution" not in declared["plain"]
    assert declared["maybe"]["execution"] == {"taskSupport": "optional"}
    checked = mcp_types.Tool.model_validate(declared["only"])
    assert checked.execution is not None and checked.execution.task_support == "required"
