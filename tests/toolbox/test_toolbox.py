"""The Toolbox: one catalog for every kind of tool, with categories, tags, aliases and events."""

from __future__ import annotations

import types
import warnings
from typing import Any, cast

import pytest

from toolkeeper import HostedTool, Tool, ToolRisk, UnknownToolError, UsageError, tool
from toolkeeper.toolbox import ChangeEvent, Toolbox, ToolConflictWarning, as_toolbox


@tool(category="communication", tags={"email", "notify"})
def send_email(to: str, subject: str) -> str:
    """Send an email to a recipient."""
    return f"sent to {to}"


@tool(category="data/visualization", risk="sensitive")
def plot(values: list[float]) -> str:
    """Plot a chart of values."""
    return f"{len(values)} points"


@tool(category="data", aliases=("tabulate",))
def table(rows: int) -> str:
    """Make a table."""
    return f"{rows} rows"


SEARCH = HostedTool(name="web_search", provider_specs={"openai": {"type": "web_search"}})


def box() -> Toolbox:
    return Toolbox([send_email, plot, table, SEARCH])


def test_the_catalog_lists_gets_counts_and_filters_by_risk() -> None:
    tb = box()
    assert tb.names() == ["send_email", "plot", "table", "web_search"]
    assert len(tb) == 4 and "plot" in tb and "nope" not in tb
    assert tb.get("plot") is plot and tb.get("nope") is None
    assert tb.all()[-1] is SEARCH
    assert tb.by_risk(ToolRisk.SENSITIVE) == [plot]


def test_register_tool_files_a_tool_with_its_category_tags_and_aliases() -> None:
    tb = Toolbox()
    tb.register_tool(send_email, category="communication", tags=["email", "notify"],
                     aliases=["mail"])
    assert tb.get_tool("mail") is send_email
    assert tb.browse("communication") == [send_email]
    assert tb.entry("send_email").tags == frozenset({"email", "notify"})  # type: ignore[union-attr]


def test_categories_are_a_tree_and_browse_includes_the_subtree() -> None:
    tb = box()
    assert tb.browse("data") == [plot, table]
    assert tb.browse("data/visualization") == [plot]
    assert "data/exploration" in tb.categories  # the built-in categories exist
    assert "productivity" in tb.categories.children()


def test_a_plain_list_is_accepted_wherever_a_toolbox_is() -> None:
    catalog = as_toolbox([send_email, lambda_tool()])
    assert catalog.names() == ["send_email", "double"]


def lambda_tool() -> Tool:
    return Tool.from_function(lambda x: x * 2, name="double")


def test_functions_are_turned_into_tools_and_bad_objects_refused() -> None:
    def area(w: float, h: float) -> float:
        """Area."""
        return w * h

    tb = Toolbox([area])
    assert tb.execute_tool("area", w=2, h=3) == 6
    with pytest.raises(UsageError, match="cannot add"):
        tb.add(42)


def test_name_conflicts_warn_naming_both_tools_and_the_last_wins() -> None:
    tb = box()
    other = Tool.from_function(lambda rows: "other", name="table")
    with pytest.warns(ToolConflictWarning, match="'table' is taken by Tool"):
        tb.add(other)
    assert tb.get("table") is other
    with pytest.warns(ToolConflictWarning, match="the first one is kept"):
        tb.add(Tool.from_function(lambda rows: "third", name="table"), on_conflict="keep")
    assert tb.get("table") is other
    with pytest.raises(UsageError, match="already in the toolbox"):
        Toolbox([send_email], on_conflict="error").add(
            Tool.from_function(lambda to: to, name="send_email"))


def test_disable_and_enable_with_a_reason_that_explain_shows() -> None:
    tb = box()
    tb.disable("plot", reason="chart service down")
    assert "plot" not in tb.names() and tb.get("plot") is None
    explained = {e.name: e for e in tb.explain()}
    assert explained["plot"].enabled is False
    assert explained["plot"].reason == "chart service down"
    assert tb.search("plot a chart", limit=5) == [] or all(h.name != "plot" for h in tb.search("plot chart"))
    tb.enable("plot")
    assert tb.search("plot a chart of values")[0].name == "plot"


def test_namespaces_from_modules_classes_and_toolboxes() -> None:
    module = types.ModuleType("geo")

    def distance(a: str, b: str) -> float:
        """Distance between two places."""
        return 1.0

    distance.__module__ = "geo"
    module.distance = distance  # type: ignore[attr-defined]

    class Calculator:
        def add(self, a: int, b: int) -> int:
            """Add two numbers."""
            return a + b

        def _private(self) -> None:
            return None

    tb = Toolbox()
    assert tb.add_module(module, namespace="geo") == ["geo-distance"]
    assert tb.add_class(Calculator) == ["calculator-add"]
    assert tb.execute_tool("calculator-add", a=1, b=2) == 3
    assert tb.add_toolbox(box(), namespace="base")[0] == "base-send_email"
    tb.set_namespace_enabled("base", False, reason="maintenance")
    assert not any(n.startswith("base-") for n in tb.names())
    assert tb.remove_namespace("base") == ["base-send_email", "base-plot", "base-table"]
    merged = Toolbox()
    merged.merge(tb)
    assert merged.names() == tb.names()


def test_change_notifications() -> None:
    tb = Toolbox()
    events: list[ChangeEvent] = []
    unsubscribe = tb.subscribe(events.append)
    tb.add(send_email)
    tb.disable("send_email", reason="quota")
    tb.remove("send_email")
    unsubscribe()
    tb.add(plot)
    assert [(e.kind, e.names, e.reason) for e in events] == [
        ("added", ("send_email",), None), ("disabled", ("send_email",), "quota"),
        ("removed", ("send_email",), None),
    ]
    assert [e.version for e in events] == [1, 2, 3]


def test_unknown_names_list_the_closest_tools() -> None:
    with pytest.raises(UnknownToolError, match="did you mean 'send_email'"):
        box().lookup("send_emial")
    with pytest.raises(UnknownToolError):
        box().remove("nothing")


def test_schemas_leave_out_deferred_and_disabled_tools() -> None:
    deferred = Tool.from_function(lambda q: q, name="rare",
                                  metadata=__import__("toolkeeper").ToolMetadata(defer=True))
    tb = Toolbox([send_email, plot, deferred])
    tb.disable("plot")
    assert [d["function"]["name"] for d in cast(Any, tb.schemas())] == ["send_email"]
    assert [d["name"] for d in tb.deferred_schemas("anthropic")] == ["rare"]
    assert tb.schema_for("rare", "mcp")["name"] == "rare"


def test_execute_tool_calls_with_calls_and_with_a_provider_response() -> None:
    from toolkeeper import ToolCall

    tb = box()
    results: list[Any] = tb.execute_tool_calls([ToolCall(id="1", name="table", arguments={"rows": "3"}),
                                     ToolCall(id="2", name="table", arguments={}),
                                     ToolCall(id="3", name="ghost")])
    assert results[0].text == "3 rows"
    assert results[1].is_error and "missing required argument 'rows'" in results[1].text
    assert results[2].error_code == "unknown_tool"
    response: dict[str, Any] = {"content": [
        {"type": "tool_use", "id": "t1", "name": "send_email", "input": {"to": "a", "subject": "s"}}]}
    message: Any
    (message,) = tb.execute_tool_calls(response, api_format="anthropic")
    assert message["content"][0]["content"][0]["text"] == "sent to a"


def test_get_agrees_with_the_entries_through_adds_aliases_disables_and_removes() -> None:
    import random

    from toolkeeper import Tool

    rng = random.Random(3)
    box = Toolbox()
    names = [f"t{i}" for i in range(40)]
    for step in range(400):
        name = rng.choice(names)
        action = rng.choice(["add", "alias", "disable", "enable", "remove"])
        tool = Tool(name=name, description="d", parameters={"type": "object", "properties": {}})
        if action == "add":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                box.add(tool)
        elif action == "alias":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                box.register_tool(tool, aliases=[f"alias_{name}", f"a{step % 7}"])
        elif name in box:
            getattr(box, action)(name)  # disable, enable or remove
        for probe in [*names, *[f"alias_{n}" for n in names], *[f"a{k}" for k in range(7)]]:
            entry = box.entry(probe)
            expected = entry.tool if entry is not None and entry.enabled else None
            assert box.get(probe) is expected, (step, action, probe)
