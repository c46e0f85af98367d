"""Search ranks tools with several signals, updates incrementally, and tokenizes identifiers."""

from __future__ import annotations

from toolkeeper import Tool, ToolMetadata, tool
from toolkeeper.toolbox import Toolbox, tokenize
from toolkeeper.toolbox.search import SearchOptions


@tool(category="communication", tags={"email", "notify"})
def send_email(to: str, subject: str, body: str) -> str:
    """Send an email message to a recipient."""
    return "sent"


@tool(category="research")
def get_weather(city: str) -> str:
    """Get the current weather forecast for a city.

    Args:
        city: City name.
    """
    return "sunny"


@tool(category="data/visualization")
def render_chart(values: list[float], title: str = "") -> str:
    """Render a line chart from a series of numbers."""
    return "chart"


def catalog() -> Toolbox:
    return Toolbox([send_email, get_weather, render_chart])


def test_tokenizer_splits_identifiers_and_cjk() -> None:
    assert tokenize("get_weather getWeather get.weather get-weather") == ["get", "weather"] * 4
    assert tokenize("HTTPRequest") == ["http", "request"]
    assert tokenize("天气预报") == ["天", "气", "预", "报", "天气", "气预", "预报"]
    assert tokenize("calculating the areas") == ["calcul", "area"]


def test_search_ranks_by_meaning_of_words_and_reports_signals() -> None:
    hits = catalog().search("what's the weather in Lisbon")
    assert hits[0].name == "get_weather"
    assert hits[0].signals["bm25"] == 1.0
    assert hits[0].score >= hits[-1].score


def test_tags_and_categories_boost() -> None:
    hits = catalog().search("notify by email")
    assert hits[0].name == "send_email"
    assert hits[0].signals.get("tag") == SearchOptions().tag_boost
    assert catalog().search("visualization of numbers")[0].signals.get("category")


def test_fuzzy_matching_forgives_typos_in_tool_words() -> None:
    hits = catalog().search("wether forcast")
    assert hits[0].name == "get_weather"
    assert "fuzzy" in hits[0].signals
    assert Toolbox([get_weather], search=SearchOptions.bm25_only()).search("wether forcast") == []


def test_the_index_updates_on_add_remove_and_enable() -> None:
    tb = catalog()
    assert "translate_text" not in [h.name for h in tb.search("translate text")]
    translate = Tool.from_function(lambda text, lang: text, name="translate_text",
                                   description="Translate text into another language")
    tb.add(translate)
    assert tb.search("translate text")[0].name == "translate_text"
    tb.disable("translate_text")
    assert "translate_text" not in [h.name for h in tb.search("translate text")]
    tb.enable("translate_text")
    tb.remove("translate_text")
    assert "translate_text" not in [h.name for h in tb.search("translate text")]


def test_cjk_descriptions_are_searchable() -> None:
    weather_zh = Tool.from_function(lambda city: city, name="tianqi", description="查询城市的天气预报")
    tb = Toolbox([weather_zh, send_email])
    assert tb.search("天气")[0].name == "tianqi"


def test_search_hint_and_aliases_are_indexed() -> None:
    t = Tool.from_function(lambda: 1, name="ipynb_run",
                           metadata=ToolMetadata(search_hint="jupyter notebook cell"))
    tb = Toolbox()
    tb.add(t, aliases=["execute_notebook"])
    assert tb.search("jupyter")[0].name == "ipynb_run"
    assert tb.search("execute notebook")[0].name == "ipynb_run"


def test_empty_queries_and_empty_catalogs_give_no_hits() -> None:
    assert catalog().search("   ") == []
    assert Toolbox().search("anything") == []


def test_parameter_enum_values_and_nested_parameters_are_indexed() -> None:
    convert = Tool(name="convert_reading", description="Convert a sensor reading.", parameters={
        "type": "object", "properties": {
            "unit": {"type": "string", "enum": ["fahrenheit", "kelvin"]},
            "target": {"type": "object", "properties": {
                "device": {"type": "string", "description": "the thermostat to update"}}},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["greenhouse"]}},
        }})
    tb = Toolbox([convert, send_email, get_weather, render_chart])
    assert tb.search("in fahrenheit please")[0].name == "convert_reading"
    assert tb.search("thermostat")[0].name == "convert_reading"
    hit = tb.search("greenhouse")[0]
    assert hit.name == "convert_reading" and "bm25" in hit.signals
