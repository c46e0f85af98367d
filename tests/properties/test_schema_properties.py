"""Property tests: generated signatures export cleanly everywhere and arguments round-trip."""

from __future__ import annotations

import re
from typing import Any, cast

import mcp.types as mcp_types
from anthropic.types import ToolParam
from google.genai import types as genai
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionToolParam
from pydantic import TypeAdapter

from toolkeeper import Tool, WireNames, export
from toolkeeper.formats.names import name_rule, wire_name
from toolkeeper.tools.signature import fast_schema, strip_titles

from .strategies import TYPES, make_function, signatures, values_of

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
_OPENAI = TypeAdapter(ChatCompletionToolParam)
_ANTHROPIC = TypeAdapter(ToolParam)


@SETTINGS
@given(TYPES)
def test_fast_schema_equals_pydantic(tp: Any) -> None:
    expected = strip_titles(TypeAdapter(tp).json_schema())
    assert fast_schema(tp) == expected


@SETTINGS
@given(signatures())
def test_generated_tools_export_to_every_format_and_validate(sig_call: Any) -> None:
    signature, _ = sig_call
    tool = Tool.from_function(make_function("generated", signature))
    _OPENAI.validate_python(tool.get_schema("openai-chat"))
    _OPENAI.validate_python(tool.get_schema("openai-chat", strict=True))
    _ANTHROPIC.validate_python(tool.get_schema("anthropic"))
    gemini = tool.get_schema("gemini")
    genai.FunctionDeclaration.model_validate(gemini)
    if "parameters" in gemini:
        genai.Schema.model_validate(gemini["parameters"])
    mcp_types.Tool.model_validate(tool.get_schema("mcp"))
    assert tool.get_schema("openai-responses")["strict"] in (True, False)


@SETTINGS
@given(signatures())
def test_valid_arguments_round_trip_through_validation(sig_call: Any) -> None:
    signature, call = sig_call
    tool = Tool.from_function(make_function("generated", signature))
    assert tool.run_raw(call) == {**_defaults(signature), **call}


@SETTINGS
@given(signatures())
def test_strict_calls_with_null_for_optional_arguments_still_validate(sig_call: Any) -> None:
    signature, call = sig_call
    tool = Tool.from_function(make_function("generated", signature))
    strict = cast(Any, tool.get_schema("openai-chat", strict=True))["function"]
    if not strict.get("strict"):
        return
    required = set(strict["parameters"].get("required", []))
    sent = {name: call.get(name) for name in required}  # null for everything not given
    result: Any = tool.run_raw(sent)
    for name, value in call.items():
        assert result[name] == value


@SETTINGS
@given(st.text(min_size=1, max_size=150))
def test_wire_names_fit_every_provider_and_map_back(name: str) -> None:
    for api_format in ("openai-chat", "anthropic", "gemini", "mcp"):
        rule = name_rule(api_format)
        assert rule is not None
        wire = wire_name(name, api_format)
        assert rule.pattern.fullmatch(wire), (api_format, wire)
        table = WireNames([name, name + "x"], api_format)
        assert table.name(table.wire(name)) == name
        assert table.wire(name) != table.wire(name + "x")


@SETTINGS
@given(st.lists(st.text(alphabet="ab.-_ /", min_size=1, max_size=6), min_size=2, max_size=8,
                unique=True))
def test_wire_names_never_collide(names: list[str]) -> None:
    table = WireNames(names, "openai-chat")
    wires = [table.wire(n) for n in names]
    assert len(set(wires)) == len(names)
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", w) for w in wires)


@SETTINGS
@given(TYPES.flatmap(lambda tp: st.tuples(st.just(tp), values_of(tp))))
def test_raw_schema_tools_accept_what_function_tools_accept(tp_value: Any) -> None:
    tp, value = tp_value
    fn_tool = Tool.from_function(make_function("f", _one_param(tp)))
    raw_tool = Tool(name="f", parameters=fn_tool.parameters, callable=lambda **kw: kw)
    assert fn_tool.run_raw({"v": value}) == raw_tool.run_raw({"v": value})


def _one_param(tp: Any) -> Any:
    import inspect

    return inspect.Signature([inspect.Parameter("v", inspect.Parameter.KEYWORD_ONLY,
                                                annotation=tp)])


def _defaults(signature: Any) -> dict[str, Any]:
    import inspect

    return {n: p.default for n, p in signature.parameters.items()
            if p.default is not inspect.Parameter.empty}


@SETTINGS
@given(signatures())
def test_exports_never_change_the_tool_schema(sig_call: Any) -> None:
    import copy

    signature, _ = sig_call
    tool = Tool.from_function(make_function("generated", signature))
    before = copy.deepcopy(tool.parameters)
    for api_format in ("openai-chat", "openai-responses", "anthropic", "gemini", "mcp"):
        tool.get_schema(api_format)
        tool.get_schema(api_format, strict=True, think_augment=True)
    assert tool.parameters == before


_KEYS = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1,
                max_size=12)
_ARGUMENT_RULES = {"gemini": r"[A-Za-z_][A-Za-z0-9_]{0,63}", "anthropic": r"[a-zA-Z0-9_.-]{1,64}"}


def _declared_keys(schema: Any) -> list[str]:
    if isinstance(schema, list):
        return [k for item in schema for k in _declared_keys(item)]
    if not isinstance(schema, dict):
        return []
    own = list(schema["properties"]) if isinstance(schema.get("properties"), dict) else []
    return own + [k for value in schema.values() for k in _declared_keys(value)]


@SETTINGS
@given(st.dictionaries(_KEYS, st.dictionaries(_KEYS, st.text(max_size=4), max_size=3),
                       min_size=1, max_size=4))
def test_any_argument_names_fit_the_provider_and_come_back_as_they_were(
        args: dict[str, dict[str, str]]) -> None:
    properties = {name: {"type": "object", "properties": {k: {"type": "string"} for k in inner}}
                  for name, inner in args.items()}
    tool = Tool(name="t", description="T.", callable=lambda **kw: kw,
                parameters={"type": "object", "properties": properties})
    for api_format, rule in _ARGUMENT_RULES.items():
        exported = export([tool], api_format)
        declaration = exported.declarations[0]
        keys = _declared_keys(declaration.get("parameters") or declaration["input_schema"])
        assert all(re.fullmatch(rule, k) for k in keys), (api_format, keys)
        renamed = exported.names.arguments.get("t")
        to_wire = renamed.to_wire if renamed is not None else {}
        wire_args: dict[str, object] = {to_wire.get(n, n): {to_wire.get(k, k): v for k, v in inner.items()}
                     for n, inner in args.items()}
        assert exported.names.decode("t", wire_args) == args
