"""Views change what a catalog shows, never the tools; any stack of views routes names right."""

from __future__ import annotations

from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkeeper import Tool, ToolRisk, UnknownToolError
from toolkeeper.toolbox import Toolbox
from toolkeeper.toolbox.catalog import CatalogBase

RISKS = list(ToolRisk)


def named_tool(name: str, risk: ToolRisk = ToolRisk.SAFE, tags: frozenset[str] = frozenset()) -> Tool:
    # Each tool returns its own base name, so a call shows which tool it reached.
    from toolkeeper import ToolMetadata

    return Tool.from_function(lambda: name, name=name, description=f"Tool {name}", risk=risk,
                              metadata=ToolMetadata(tags=tags))


def base() -> Toolbox:
    return Toolbox([named_tool("alpha", ToolRisk.SAFE, frozenset({"x"})),
                    named_tool("beta", ToolRisk.HIGH, frozenset({"y"})),
                    named_tool("gamma", ToolRisk.CRITICAL, frozenset({"x", "y"}))])


def test_filtered_view_by_tags_risk_names_and_predicate() -> None:
    tb = base()
    assert tb.filtered(tags={"x"}).names() == ["alpha", "gamma"]
    assert tb.filtered(max_risk="high").names() == ["alpha", "beta"]
    assert tb.filtered(names={"beta"}).names() == ["beta"]
    assert tb.filtered(predicate=lambda e: e.name.endswith("a")).names() == ["alpha", "beta",
                                                                              "gamma"]
    hidden = tb.filtered(tags={"y"})
    assert hidden.get("alpha") is None
    with pytest.raises(UnknownToolError):
        hidden.execute_tool("alpha")


def test_prefixed_and_renamed_views_route_calls_to_the_right_tool() -> None:
    tb = base()
    prefixed = tb.prefixed("ops")
    assert prefixed.names() == ["ops_alpha", "ops_beta", "ops_gamma"]
    assert prefixed.execute_tool("ops_beta") == "beta"
    assert prefixed.get("alpha") is None
    assert prefixed.schemas("anthropic")[0]["name"] == "ops_alpha"
    renamed = tb.renamed({"alpha": "first"})
    assert renamed.names() == ["first", "beta", "gamma"]
    assert renamed.execute_tool("first") == "alpha"
    assert renamed.get("alpha") is None
    assert (alpha := tb.get("alpha")) is not None and alpha.name == "alpha"  # tools unchanged


def test_views_compose_and_search_through_them() -> None:
    view = base().filtered(tags={"x"}).prefixed("team", sep="-")
    assert view.names() == ["team-alpha", "team-gamma"]
    assert [h.name for h in view.search("tool gamma")] == ["team-gamma", "team-alpha"][: len(
        view.search("tool gamma"))]
    assert view.search("tool beta") == [] or all(h.name != "team-beta" for h in
                                                 view.search("tool beta"))


def test_views_follow_changes_of_the_base_toolbox() -> None:
    tb = base()
    view = tb.prefixed("p")
    tb.add(named_tool("delta"))
    tb.disable("alpha", reason="broken")
    assert view.names() == ["p_beta", "p_gamma", "p_delta"]
    assert {e.name: e.reason for e in view.explain()}["p_alpha"] == "broken"


LENSES = st.lists(
    st.one_of(
        st.tuples(st.just("filter"), st.sampled_from(RISKS)),
        st.tuples(st.just("prefix"), st.sampled_from(["a", "bb", "c"])),
        st.tuples(st.just("rename"), st.sampled_from(["alpha", "beta", "gamma", "p_alpha"])),
        st.tuples(st.just("tags"), st.sampled_from(["x", "y"])),
    ),
    max_size=4,
)


def _stack(catalog: CatalogBase, lenses: list[tuple[str, Any]]) -> CatalogBase:
    for kind, arg in lenses:
        if kind == "filter":
            catalog = catalog.filtered(max_risk=arg)
        elif kind == "prefix":
            catalog = catalog.prefixed(arg)
        elif kind == "rename":
            catalog = catalog.renamed({arg: f"renamed_{arg}"})
        else:
            catalog = catalog.filtered(tags={arg})
    return catalog


@settings(max_examples=200, deadline=None)
@given(LENSES)
def test_any_stack_of_views_calls_the_tool_it_lists(lenses: list[tuple[str, Any]]) -> None:
    tb = base()
    view = _stack(tb, lenses)
    names = view.names()
    assert len(names) == len(set(names))
    for entry in view.entries():
        base_key = view.resolve(entry.name)
        assert base_key is not None
        assert view.execute_tool(entry.name) == base_key  # reaches the tool that was listed
        assert (got := view.get(entry.name)) is entry.tool or (got is not None and got.name == entry.name)
        declared = cast(Any, entry.tool.get_schema("openai-chat"))["function"]["name"]
        exported = view.export("openai-chat")
        assert exported.names.name(declared) == entry.name


def test_a_new_kind_of_view_is_a_lens_and_composes_with_the_catalogs_views() -> None:
    from toolkeeper.toolbox import CatalogEntry, Lens, View

    class Shouting(Lens):
        """Shows every name upper-cased and hides the critical tools."""

        def to_outer(self, name: str) -> str | None:
            return name.upper()

        def to_inner(self, name: str) -> str | None:
            return name.lower() if name.isupper() else None

        def show(self, entry: CatalogEntry) -> CatalogEntry | None:
            return None if entry.risk is ToolRisk.CRITICAL else entry

    view = View(base().prefixed("ops"), Shouting()).filtered(tags={"x"})
    assert view.names() == ["OPS_ALPHA"]
    assert view.execute_tool("OPS_ALPHA") == "alpha"
    assert view.resolve("OPS_ALPHA") == "alpha"
    with pytest.raises(UnknownToolError, match="did you mean 'OPS_ALPHA'"):
        view.lookup("OPS_ALPH")
