"""Arguments are validated with one semantics for function tools and raw-schema tools."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, cast

import pytest
from pydantic import BaseModel

from toolkeeper import InvalidArgumentsError, SchemaError, Tool, ToolMetadata


class Item(BaseModel):
    sku: str
    qty: int


def _order(customer: str, items: list[Item], priority: Literal["low", "high"] = "low",
           note: str | None = None) -> dict[str, Any]:
    return {"customer": customer, "n": len(items), "priority": priority, "note": note}


RAW_SCHEMA = {
    "type": "object",
    "properties": {
        "customer": {"type": "string"},
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
                "required": ["sku", "qty"],
            },
        },
        "priority": {"type": "string", "enum": ["low", "high"], "default": "low"},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
    },
    "required": ["customer", "items"],
}


def _raw_order(customer: str, items: list[dict[str, Any]], priority: str = "low",
               note: str | None = None) -> dict[str, Any]:
    return {"customer": customer, "n": len(items), "priority": priority, "note": note}


def function_tool() -> Tool:
    return Tool.from_function(_order, name="order")


def raw_tool() -> Tool:
    return Tool(name="order", description="Order", parameters=RAW_SCHEMA, callable=_raw_order)


BOTH = pytest.mark.parametrize("make", [function_tool, raw_tool], ids=["function", "raw-schema"])


@BOTH
def test_valid_arguments_pass(make: Any) -> None:
    result = make().run_raw({"customer": "ada", "items": [{"sku": "a", "qty": 2}]})
    assert result == {"customer": "ada", "n": 1, "priority": "low", "note": None}


@BOTH
def test_obviously_meant_scalars_are_coerced(make: Any) -> None:
    kwargs = make().validate_arguments({"customer": "ada", "items": [{"sku": "a", "qty": "3"}]})
    qty = kwargs["items"][0].qty if isinstance(kwargs["items"][0], Item) else kwargs["items"][0]["qty"]
    assert qty == 3


@BOTH
def test_unknown_arguments_are_rejected_and_named(make: Any) -> None:
    with pytest.raises(InvalidArgumentsError) as info:
        make().validate_arguments({"customer": "ada", "items": [], "urgent": True})
    assert "unknown argument 'urgent'" in str(info.value)
    assert "this tool takes: customer, items, note, priority" in str(info.value)


@BOTH
def test_missing_required_argument_is_named_with_its_type(make: Any) -> None:
    with pytest.raises(InvalidArgumentsError, match=r"missing required argument 'items' \(array\)"):
        make().validate_arguments({"customer": "ada"})


@BOTH
def test_wrong_type_deep_inside_is_reported_with_its_path(make: Any) -> None:
    with pytest.raises(InvalidArgumentsError) as info:
        make().validate_arguments({"customer": "ada", "items": [{"sku": "a", "qty": 1},
                                                               {"sku": "b", "qty": "many"}]})
    problems = info.value.details["problems"]
    assert [p["path"] for p in problems] == ["items[1].qty"]
    assert "integer" in problems[0]["message"]
    assert "'many'" in problems[0]["message"]


@BOTH
def test_enum_violation_is_rejected(make: Any) -> None:
    with pytest.raises(InvalidArgumentsError) as info:
        make().validate_arguments({"customer": "ada", "items": [], "priority": "urgent"})
    message = str(info.value)
    assert "priority" in message and "'low'" in message and "'urgent'" in message


@BOTH
def test_all_problems_are_reported_at_once(make: Any) -> None:
    with pytest.raises(InvalidArgumentsError) as info:
        make().validate_arguments({"customer": 5, "bogus": 1})
    paths = {p["path"] for p in info.value.details["problems"]}
    assert paths == {"bogus", "customer", "items"}


@BOTH
def test_null_for_an_optional_argument_means_not_given(make: Any) -> None:
    # Strict-mode exports make optional arguments nullable; the default must still apply.
    result = make().run_raw({"customer": "ada", "items": [], "priority": None})
    assert result["priority"] == "low"


@BOTH
def test_arguments_must_be_an_object(make: Any) -> None:
    with pytest.raises(InvalidArgumentsError, match="must be a JSON object, got list"):
        make().validate_arguments([1, 2])


@BOTH
def test_think_augment_reason_is_stripped_before_the_call(make: Any) -> None:
    kwargs = make().validate_arguments(
        {"customer": "ada", "items": [], "toolcall_reason": "the user asked"}
    )
    assert "toolcall_reason" not in kwargs


def test_a_tool_can_opt_into_ignoring_unknown_arguments() -> None:
    t = Tool.from_function(_order, metadata=ToolMetadata(unknown_arguments="ignore"))
    assert cast(Any, t.run_raw({"customer": "ada", "items": [], "extra": 1}))["customer"] == "ada"
    raw = Tool(name="order", parameters=RAW_SCHEMA, callable=_raw_order,
               metadata=ToolMetadata(unknown_arguments="ignore"))
    assert cast(Any, raw.run_raw({"customer": "ada", "items": [], "extra": 1}))["customer"] == "ada"


def test_raw_schema_that_allows_extra_properties_accepts_them() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}},
              "additionalProperties": True}
    t = Tool(name="f", parameters=schema, callable=lambda **kw: kw)
    assert t.run_raw({"a": "1", "b": 2}) == {"a": 1, "b": 2}


@pytest.mark.parametrize(
    ("value", "expected"),
    [("5", 5), (5.0, 5), ("true", True), ("0", False), ("2.5", 2.5)],
)
def test_raw_coercion_follows_pydantic_lax_rules(value: Any, expected: Any) -> None:
    kind = {int: "integer", bool: "boolean", float: "number"}[type(expected)]
    t = Tool(name="f", parameters={"type": "object", "properties": {"v": {"type": kind}}},
             callable=lambda v: v)
    got = t.run_raw({"v": value})
    assert got == expected and type(got) is type(expected)


def test_run_returns_an_error_string_and_run_raw_raises() -> None:
    t = function_tool()
    with pytest.warns(DeprecationWarning, match="run_raw"):
        assert str(t.run({"customer": "ada"})).startswith("Error executing order: invalid arguments")
    with pytest.raises(InvalidArgumentsError):
        t.run_raw({"customer": "ada"})


def test_the_optional_null_pass_is_skipped_only_where_it_cannot_matter() -> None:
    from toolkeeper.tools.validation import _scalar

    assert _scalar({"type": "integer"}) and _scalar({"type": ["string", "null"]})
    assert not _scalar({"type": ["object", "null"]}) and not _scalar({"anyOf": []})
    assert not _scalar({"type": [{"bad": 1}]}) and not _scalar("integer")

    def plain(a: int, b: int) -> int:
        return a + b

    def optional(a: int, n: int = 5, inner: dict[str, int] | None = None) -> int:
        return a + n

    assert Tool.from_function(plain).validate_arguments({"a": 1, "b": 2}) == {"a": 1, "b": 2}
    tool = Tool.from_function(optional)
    assert tool.validate_arguments({"a": 1, "n": None})["n"] == 5  # null means "not given"


def test_a_raw_schema_refers_only_inside_itself(tmp_path: Path) -> None:
    """A ``$ref`` is resolved in the schema's own ``$defs``; one that points elsewhere (a URL, a
    file) is a definition error naming it — never fetched."""
    inside = Tool(name="inside", callable=lambda q: q, parameters={
        "type": "object", "properties": {"q": {"$ref": "#/$defs/query"}},
        "$defs": {"query": {"type": "string"}}})
    assert inside.validate_arguments({"q": "x"}) == {"q": "x"}
    secret = tmp_path / "query.json"
    secret.write_text('{"type": "string"}')
    for ref in (secret.as_uri(), "http://127.0.0.1:9/query.json", "query.json"):
        with pytest.raises(SchemaError) as refused:
            Tool(name="outside", callable=lambda q: q, parameters={
                "type": "object", "properties": {"q": {"$ref": ref}}})
        message = str(refused.value)
        assert f"tool 'outside': its parameters refer to {ref!r} ($ref)" in message
        assert "never fetches" in message and "\n" not in message
