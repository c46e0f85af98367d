"""Tools are frozen, namespaced predictably, and carry risk and HITL defaults."""

from __future__ import annotations

import dataclasses

import pytest

from toolkeeper import (
    BaseTool,
    HitlMode,
    HostedTool,
    ProviderDefinedTool,
    ProviderSpec,
    Tool,
    ToolContext,
    ToolResult,
    ToolRisk,
    UsageError,
    WireFormatError,
    is_hosted_tool,
    is_provider_defined_tool,
    normalize_tool_name,
)
from toolkeeper.core.risk import default_hitl_mode
from toolkeeper.tools.definition import ToolDefinition, define


def _add(a: int, b: int) -> int:
    return a + b


def test_risk_ladder_is_ordered_and_parses_strings() -> None:
    assert ToolRisk.SAFE < ToolRisk.SENSITIVE < ToolRisk.HIGH < ToolRisk.CRITICAL
    assert max([ToolRisk.HIGH, ToolRisk.SAFE, ToolRisk.CRITICAL]) is ToolRisk.CRITICAL
    assert ToolRisk("Critical") is ToolRisk.CRITICAL
    assert sorted(ToolRisk, reverse=True)[0] is ToolRisk.CRITICAL


def test_default_hitl_follows_risk_and_can_be_overridden() -> None:
    assert default_hitl_mode(ToolRisk.SAFE) is HitlMode.NONE
    assert default_hitl_mode(ToolRisk.SENSITIVE) is HitlMode.NONE
    assert default_hitl_mode(ToolRisk.CRITICAL) is HitlMode.BLOCKING
    critical = Tool.from_function(_add, risk="critical")
    assert critical.hitl_mode is HitlMode.BLOCKING
    relaxed = Tool.from_function(_add, risk=ToolRisk.CRITICAL,
                                 hitl_mode=HitlMode.FIRE_AND_CONTINUE)
    assert relaxed.hitl_mode is HitlMode.FIRE_AND_CONTINUE


def test_tools_are_frozen_and_replace_derives_copies() -> None:
    t = Tool.from_function(_add)
    with pytest.raises(UsageError, match="frozen"):
        t.name = "other"
    renamed = t.replace(name="plus", risk="high")
    assert (t.name, renamed.name, renamed.risk) == ("_add", "plus", ToolRisk.HIGH)
    assert renamed.run_raw({"a": 1, "b": 2}) == 3


def test_a_tool_is_one_frozen_definition_and_a_changed_copy_gets_a_new_one() -> None:
    t = Tool.from_function(_add, name="add")
    definition = t.definition
    assert isinstance(definition, ToolDefinition) and definition.name == t.name == "add"
    with pytest.raises(dataclasses.FrozenInstanceError):
        definition.name = "other"  # type: ignore[misc]
    copy = t.replace(description="Add two numbers.", risk="high")
    assert t.definition is definition and definition.description == ""
    assert (copy.description, copy.risk, copy.hitl_mode) == (
        "Add two numbers.", ToolRisk.HIGH, HitlMode.BLOCKING)
    assert copy.definition.function is definition.function  # the function was inspected once


def test_a_tool_is_built_from_its_definition_alone() -> None:
    made = Tool(define("add", parameters={"type": "object", "properties": {
        "a": {"type": "integer"}, "b": {"type": "integer"}}}, callable=_add))
    again = Tool(made.definition)
    assert again.run_raw({"a": "1", "b": 2}) == 3
    assert again.get_schema("anthropic") == made.get_schema("anthropic")
    with pytest.raises(UsageError, match="definition alone"):
        Tool(made.definition, name="other")  # type: ignore[call-overload]


def test_update_namespace_gives_the_tool_a_new_definition_and_leaves_the_old_one_whole() -> None:
    t = Tool.from_function(_add, name="add")
    before = t.definition
    assert t.update_namespace("calc") is t
    assert (before.name, before.namespace) == ("add", None)
    assert (t.definition.name, t.definition.namespace, t.definition.method_name) == (
        "calc-add", "calc", "add")


def test_a_class_body_declares_the_default_risk_and_a_tool_may_choose_another() -> None:
    class Deploy(BaseTool):
        risk = ToolRisk.HIGH

        async def execute(self, *, target: str) -> str:  # type: ignore[override]
            return target

    assert Deploy.risk is ToolRisk.HIGH
    plain, critical = Deploy(), Deploy(risk="critical")
    assert (plain.risk, plain.hitl_mode, plain.hitl_explicit) == (
        ToolRisk.HIGH, HitlMode.BLOCKING, False)
    assert (critical.risk, critical.definition.risk, Deploy.risk) == (
        ToolRisk.CRITICAL, ToolRisk.CRITICAL, ToolRisk.HIGH)


def test_with_namespace_returns_a_copy() -> None:
    t = Tool.from_function(_add, name="add")
    namespaced = t.with_namespace("Math Ops")
    assert namespaced.name == "math_ops-add"
    assert t.name == "add" and t.namespace is None


def test_exported_declaration_follows_a_namespace_change() -> None:
    t = Tool.from_function(_add, name="add")
    assert t.get_schema("anthropic")["name"] == "add"
    t.update_namespace("calc")
    assert t.get_schema("anthropic")["name"] == "calc-add"


def test_normalize_tool_name() -> None:
    assert normalize_tool_name("getUserIDFromDB") == "get_user_id_from_db"
    assert normalize_tool_name("HTTPRequest") == "http_request"
    assert normalize_tool_name("math.ops-v2") == "math_ops_v2"
    assert normalize_tool_name("add_add_get") == "add_get"


def test_base_tool_schema_comes_from_execute_when_not_given() -> None:
    class WeatherTool(BaseTool):
        risk = ToolRisk.SENSITIVE

        async def execute(self, *, city: str, days: int = 1, ctx: ToolContext) -> str:  # type: ignore[override]
            """Forecast for a city.

            Args:
                city: City name.
                days: Days ahead.
            """
            return f"{city}:{days}:{ctx.tool_name}"

    t = WeatherTool()
    assert t.name == "weather"
    assert t.description == "Forecast for a city."
    assert t.parameters["properties"]["city"]["description"] == "City name."
    assert "ctx" not in t.parameters["properties"]
    assert t.run_raw({"city": "Oslo"}) == "Oslo:1:weather"


def test_base_tool_without_execute_is_a_usage_error() -> None:
    class Broken(BaseTool):
        pass

    with pytest.raises(UsageError, match="does not define"):
        Broken(name="broken", input_schema={})


def test_base_tool_may_keep_its_own_state() -> None:
    class Counter(BaseTool):
        def __init__(self) -> None:
            super().__init__(name="count", description="Count calls", input_schema={})
            self.calls = 0

        async def execute(self) -> str:  # type: ignore[override]
            self.calls += 1
            return str(self.calls)

    counter = Counter()
    counter.run_raw({})
    assert counter.run_raw({}) == "2"


def test_hosted_and_provider_defined_dispatch_order() -> None:
    search = HostedTool(name="web_search", provider_specs={
        "openai": {"type": "web_search_preview"},
        "anthropic": ProviderSpec(name="web_search", provider="anthropic",
                                  spec={"type": "web_search_20250305", "name": "web_search"}),
    })

    class Computer(ProviderDefinedTool):
        call_types = ("computer_call",)

        async def handle_call(self, call: object, ctx: object) -> ToolResult:
            return ToolResult.text_result("clicked")

    computer = Computer(name="computer", provider_specs={"openai-responses": {
        "type": "computer_use_preview", "display_width": 1024, "display_height": 768,
        "environment": "browser"}}, risk=ToolRisk.CRITICAL)

    assert is_hosted_tool(search) and not is_provider_defined_tool(search)
    assert is_provider_defined_tool(computer) and not is_hosted_tool(computer)
    assert not is_hosted_tool(Tool.from_function(_add))
    assert search.get_schema("openai-responses") == {"type": "web_search_preview"}
    assert search.get_schema("anthropic")["type"] == "web_search_20250305"
    assert computer.hitl_mode is HitlMode.BLOCKING
    with pytest.raises(WireFormatError, match="no declaration for 'gemini'"):
        search.get_schema("gemini")


def test_empty_name_is_refused() -> None:
    with pytest.raises(UsageError, match="non-empty"):
        Tool(name="  ")
