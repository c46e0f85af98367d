"""Sloppy schemas from the wild: repaired where the meaning is clear, reported (with paths) where not."""

from __future__ import annotations

import warnings
from typing import Any, cast

import pytest

from toolkeeper import SchemaWarning, Tool
from toolkeeper.tools.rawschema import normalize_schema


def test_non_standard_type_names_are_repaired() -> None:
    schema = {
        "type": "OBJECT",
        "properties": {
            "a": {"type": "dict"}, "b": {"type": "float"}, "c": {"type": "long"},
            "d": {"type": "String"}, "e": {"type": "tuple", "items": {"type": "int"}},
            "f": {"type": "any"}, "g": {"type": ["str", "None"]}, "h": {"type": "bool"},
        },
    }
    fixed, problems = normalize_schema(schema)
    props: Any = fixed["properties"]
    assert fixed["type"] == "object"
    assert [props[k].get("type") for k in "abcdefgh"] == [
        "object", "number", "integer", "string", "array", None, ["string", "null"], "boolean"
    ]
    assert props["e"]["items"] == {"type": "integer"}
    assert problems == []


def test_missing_top_level_type_and_draft3_required_are_repaired() -> None:
    fixed, problems = normalize_schema(
        {"properties": {"a": {"type": "string", "required": True}, "b": {"type": "integer"}}}
    )
    assert fixed["type"] == "object"
    assert fixed["required"] == ["a"]
    assert "required" not in cast(Any, fixed)["properties"]["a"]
    assert problems == []


def test_unclear_problems_are_reported_with_json_paths_not_raised() -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "default": "five"},
            "mode": {"type": "string", "enum": ["a", 2]},
            "x": {"type": "quaternion"},
            "nested": {"type": "object", "properties": {"y": {"type": "number", "default": []}}},
        },
        "required": ["n", "ghost"],
    }
    with pytest.warns(SchemaWarning) as record:
        fixed, problems = normalize_schema(schema, where="tool 't'")
    assert set(problems) == {
        "tool 't'.properties.n.default: 'five' does not match type 'integer'",
        "tool 't'.properties.mode.enum: value 2 does not match type 'string'",
        "tool 't'.properties.x.type: unknown type name 'quaternion'; treated as any type",
        "tool 't'.properties.nested.properties.y.default: [] does not match type 'number'",
        "tool 't'.required: names 'ghost', which is not a property",
    }
    assert len(record) == 5
    assert "type" not in cast(Any, fixed)["properties"]["x"]


def test_non_object_schema_is_replaced_with_a_warning() -> None:
    with pytest.warns(SchemaWarning, match="must be a JSON object"):
        fixed, _ = normalize_schema(["not", "a", "schema"])
    assert fixed == {"type": "object", "properties": {}}


def test_tool_keeps_its_schema_warnings() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SchemaWarning)
        t = Tool(name="t", parameters={"type": "object", "properties": {}, "required": ["zz"]},
                 callable=lambda: None)
    assert t.schema_warnings == ("tool 't' parameters.required: names 'zz', which is not a property",)


def test_input_schema_is_not_mutated() -> None:
    schema = {"type": "dict", "properties": {"a": {"type": "int", "required": True}}}
    snapshot = repr(schema)
    normalize_schema(schema)
    assert repr(schema) == snapshot


def test_a_schema_the_validator_cannot_compile_fails_at_definition() -> None:
    from toolkeeper import SchemaError

    with pytest.raises(SchemaError, match="tool 'bad': parameters are not a valid JSON Schema"):
        Tool(name="bad", parameters={"type": "object", "properties": {
            "code": {"type": "string", "pattern": "([unclosed"}}}, callable=lambda code: code)
