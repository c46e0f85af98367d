"""Catalog search without the search extra: a pure-Python BM25 that scores like tantivy's, and
typo matching with difflib."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from toolkeeper import Tool
from toolkeeper.toolbox import Toolbox, search
from toolkeeper.toolbox.bm25 import FieldBM25
from toolkeeper.toolbox.tokenize import tokenize

EVAL = Path(__file__).resolve().parents[2] / "benchmarks" / "search_eval"


def _eval_tools(limit: int) -> list[Tool]:
    tools: dict[str, Tool] = {}
    with warnings.catch_warnings():  # real definitions: some defaults do not match their type
        warnings.simplefilter("ignore")
        for line in (EVAL / "tools.jsonl").open():
            raw = json.loads(line)
            if raw["name"] not in tools and len(tools) < limit:
                tools[raw["name"]] = Tool(name=raw["name"], description=raw.get("description", ""),
                                          parameters=raw.get("parameters"))
    return list(tools.values())


@pytest.fixture
def no_search_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search, "_tantivy", lambda: None)
    monkeypatch.setattr(search, "_rapidfuzz", lambda: None)


def test_bm25_scores_one_field_by_the_okapi_formula() -> None:
    index = FieldBM25()
    index.add("a", {"text": ["weather", "city"]})
    index.add("b", {"text": ["email", "send", "email"]})
    scores = index.search([("weather", 1.0)], {"text": 1.0}, 10)
    idf = math.log(1 + (2 - 1 + 0.5) / (1 + 0.5))
    average = (2 + 3) / 2
    assert scores == {"a": pytest.approx(idf * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 2 / average)))}


def test_a_removed_or_replaced_document_leaves_no_trace() -> None:
    index = FieldBM25()
    index.add("a", {"text": ["weather"]})
    index.add("a", {"text": ["email"]})
    index.add("b", {"text": ["weather"]})
    index.remove("b")
    assert index.search([("weather", 1.0)], {"text": 1.0}, 10) == {}
    assert list(index.search([("email", 1.0)], {"text": 1.0}, 10)) == ["a"]
    assert len(index) == 1


def test_without_the_extra_search_ranks_like_tantivy(no_search_extra: None,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    tools = _eval_tools(300)
    queries = ["find the area of a triangle", "current weather in a city", "send a message",
               "convert currency amounts", "calculate the factorial of a number",
               "get stock price", "translate text to french", "book a flight ticket"]
    python = Toolbox(tools)
    assert python._index.backend == "python"
    mine = [[h.name for h in python.search(q, limit=3)] for q in queries]
    monkeypatch.undo()
    tantivy = Toolbox(tools)
    theirs = [[h.name for h in tantivy.search(q, limit=3)] for q in queries]
    assert [m[0] for m in mine] == [t[0] for t in theirs]
    assert sum(len(set(m) & set(t)) for m, t in zip(mine, theirs, strict=True)) >= 0.9 * 3 * len(queries)


WORD_FORMS = ["calculating", "calculated", "calculates", "calculation", "queries", "query",
              "emails", "status", "addresses", "generously", "warnings", "forecasting"]
NO_PYSTEMMER = """
import json, sys
sys.modules["Stemmer"] = None  # as installed without the search extra
from toolkeeper.toolbox import tokenize
print(json.dumps([tokenize(w) for w in sys.argv[1:]]))
"""


def test_without_the_extra_words_are_stemmed_as_with_it() -> None:
    """The core install stems with Snowball too (pure Python), so word forms meet the same
    tools whichever is installed: "calculation" finds a tool that is "calculating"."""
    core = subprocess.run([sys.executable, "-c", NO_PYSTEMMER, *WORD_FORMS], check=True,
                          capture_output=True, text=True, timeout=120)
    with_extra = [tokenize(w) for w in WORD_FORMS]
    assert json.loads(core.stdout) == with_extra
    assert tokenize("calculation")[0] == tokenize("calculating")[0] == "calcul"


def test_without_the_extra_a_typo_still_finds_the_tool(no_search_extra: None) -> None:
    box = Toolbox([Tool.from_function(lambda city: city, name="get_weather",
                                      description="Current conditions for a place"),
                   Tool.from_function(lambda to: to, name="send_email", description="Mail")])
    hits = box.search("wether")
    assert hits[0].name == "get_weather" and "fuzzy" in hits[0].signals


def test_without_the_extra_search_follows_additions_and_removals(no_search_extra: None) -> None:
    box = Toolbox([Tool.from_function(lambda city: city, name="get_weather",
                                      description="Current conditions for a place")])
    assert box.search("weather")[0].name == "get_weather"
    box.add(Tool.from_function(lambda: 0, name="weather_alerts", description="Weather warnings"))
    box.remove("get_weather")
    assert [h.name for h in box.search("weather")] == ["weather_alerts"]
