"""Search ranks tools with several signals, updates incrementally, and tokenizes identifiers."""

from __future__ import annotations

import random

import pytest

from toolkeeper import Tool, ToolMetadata, tool
from toolkeeper.toolbox import Toolbox, search, tokenize
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


def weather_tools(count: int) -> list[Tool]:
    """Tools that all mention the weather, each description a word longer than the last (so
    each has its own BM25 score)."""
    return [Tool.from_function(lambda: 1, name=f"weather_{n}",
                               description="Weather report " + "with more words " * n)
            for n in range(count)]


def test_a_filter_is_asked_only_about_the_tools_that_can_reach_the_first_results() -> None:
    """A view's filter runs per tool asked about: a search for 3 among 60 matching tools asks
    about the best few, in order, not about every tool that matched a word."""
    tb = Toolbox(weather_tools(80), search=SearchOptions(semantic=None))
    asked: list[str] = []

    def allowed(key: str) -> bool:
        asked.append(key)
        return key != "weather_0"  # the best one is filtered out: the next ones come in

    found = [key for key, _, _ in tb.search_keys("weather", limit=3, allowed=allowed)]
    assert found == ["weather_1", "weather_2", "weather_3"]
    assert asked == ["weather_0", *found], asked


def test_the_first_results_are_those_of_a_longer_list() -> None:
    """Only the candidates that can reach the first ``limit`` are scored in full: the first
    results of a search are the start of a longer search's, for every limit."""
    tb = Toolbox([*weather_tools(30), send_email, get_weather, render_chart])
    for query in ("weather report", "wether with words", "email the chart", "forecast"):
        longest = tb.search(query, limit=40)
        for limit in (1, 3, 5, 10):
            assert tb.search(query, limit=limit) == longest[:limit], (query, limit)


def test_a_typo_is_compared_only_with_name_words_of_a_length_that_can_match(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Typo matching asks 85 % similarity, 2 × matches / both lengths: a word is compared only
    with name words whose length is within 15 % of the two lengths' sum."""
    compared: list[list[str]] = []
    closest = search._closest

    def recording(term: str, vocabulary: list[str]) -> str | None:
        compared.append(list(vocabulary))
        return closest(term, vocabulary)

    monkeypatch.setattr(search, "_closest", recording)
    assert catalog().search("wether")[0].name == "get_weather"
    assert compared[0] == ["chart", "email", "render", "weather"], compared


@pytest.mark.parametrize("fuzzy", ["rapidfuzz", "difflib"])
def test_name_words_of_a_near_length_give_the_closest_word_of_them_all(
        fuzzy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if fuzzy == "difflib":
        monkeypatch.setattr(search, "_rapidfuzz", lambda: None)
    rng = random.Random(5)
    letters = "abcde"
    vocabulary = sorted({"".join(rng.choices(letters, k=rng.randint(2, 16))) for _ in range(400)})
    words = search._Words.of({w: {"name": [w], "tags": [], "category": []} for w in vocabulary})
    found = 0
    for _ in range(300):
        term = "".join(rng.choices(letters, k=rng.randint(4, 14)))
        match = search._closest(term, vocabulary)
        assert search._closest(term, words.near(len(term))) == match, term
        found += match is not None
    assert found > 20  # the words are close enough for many to match
