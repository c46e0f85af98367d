"""Token vectors: a second, cheap reading of meaning beside the sentence model.

Each WordPiece token of the catalog gets one static vector from the sentence model itself
(its output for the token read alone, ``SentenceEncoder.token_vectors``), centred on the
catalog's tokens. A text's vector is the idf-weighted sum of its tokens' vectors, the idf
counted over the catalog's tools. It reads a text as a bag of tokens the model knows, where
the model reads the sentence: fused with the model's cosine it adds what the model's single
pooled vector smooths away (a rare token shared by the query and one tool). A query costs
one tokenization and one product with the tools' matrix (about 0.1 ms for 1,000 tools).

Only tokens the model reads as words or pieces of words have a vector: an English vocabulary
spells other scripts out one character at a time, and a character's vector would outweigh
what the texts mean (a query in such a script is ranked by the model's cosine alone). Only
tokens that occur in a tool's text get a vector (a query token no tool has cannot
match one), computed in batches when tools are added and kept on disk with the tools'
vectors (``embedcache``).
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .encoder import _np

if TYPE_CHECKING:
    from .embedcache import EmbeddingCache
    from .encoder import Array

__all__ = ["TokenModel", "TokenVectors"]


@runtime_checkable
class TokenModel(Protocol):
    """What token vectors need of a sentence encoder (``SentenceEncoder`` is one)."""

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's tokens that stand for words or pieces of words (not the characters of
        a script the model's vocabulary spells out: ``encoder.word_pieces``)."""

    def token_vectors(self, ids: Sequence[int]) -> Array: ...


def _cache_key(token: int) -> str:
    return f"\x00token {token}"  # never a tool's text: tool texts and tokens share no key


class TokenVectors:
    """The token-vector similarity of a query to each tool, kept up to date as tools change.

    Args:
        cache: Where token vectors are kept between processes (``None``: not kept).
    """

    def __init__(self, cache: EmbeddingCache | None = None) -> None:
        self._cache = cache
        self._ids: dict[str, Counter[int]] = {}  # key → its text's token counts
        self._df: Counter[int] = Counter()  # token → how many tools hold it
        self._vectors: dict[int, Array] = {}  # token → its static vector
        self._matrix: Array | None = None  # rows in the order of ``_order``, unit length
        self._order: list[str | None] | None = None
        np = _np()
        self._table: Array = np.zeros((0, 1), dtype=np.float32)  # live tokens' centred vectors
        self._row: dict[int, int] = {}  # token → its row of the table
        self._weights: Array = np.zeros(0, dtype=np.float32)  # each row's idf
        self._lock = threading.Lock()

    def update(self, model: TokenModel, texts: dict[str, str]) -> None:
        """Take these tools' texts (key → text): their tokens get vectors (from the disk
        cache, else the model, outside the lock)."""
        counts = {key: Counter(ids) for key, ids in
                  zip(texts, model.token_ids(list(texts.values())), strict=True)}
        with self._lock:
            known = set(self._vectors)
        todo = sorted({t for c in counts.values() for t in c} - known)
        fresh = self._load(model, todo) if todo else {}
        with self._lock:
            self._vectors.update(fresh)
            for key, count in counts.items():
                self._forget(key)
                self._ids[key] = count
                self._df.update(count.keys())
            self._matrix = None

    def remove(self, key: str) -> None:
        with self._lock:
            self._forget(key)
            self._matrix = None

    def _forget(self, key: str) -> None:
        old = self._ids.pop(key, None)
        if old is not None:
            self._df.subtract(old.keys())

    def _load(self, model: TokenModel, todo: list[int]) -> dict[int, Array]:
        found = self._cache.get([_cache_key(t) for t in todo]) if self._cache else {}
        out = {t: found[_cache_key(t)] for t in todo if _cache_key(t) in found}
        missing = [t for t in todo if t not in out]
        if missing:
            computed = dict(zip(missing, model.token_vectors(missing), strict=True))
            if self._cache is not None:
                self._cache.put({_cache_key(t): v for t, v in computed.items()})
            out.update(computed)
        return out

    def similarities(self, model: TokenModel, query: str, order: list[str | None]) -> Array:
        """The cosine of ``query``'s token vector to each tool's, one per entry of ``order``
        (0 for ``None`` and for a tool this does not know)."""
        np = _np()
        ids = Counter(model.token_ids([query])[0])
        with self._lock:
            if self._matrix is None or self._order != order:
                self._rebuild(order)
            assert self._matrix is not None
            vector = self._vector(ids)
            matrix = self._matrix
        sims: Array = (np.zeros(len(order), dtype=np.float32) if vector is None
                       else matrix @ vector)
        return sims

    def _vector(self, ids: Counter[int]) -> Array | None:
        """A text's unit vector: its known tokens' centred vectors, idf-weighted; ``None``
        when it has none."""
        np = _np()
        rows = [row for t in ids if (row := self._row.get(t)) is not None]
        if not rows:
            return None
        counts = np.fromiter((ids[t] for t in ids if t in self._row), dtype=np.float32,
                             count=len(rows))
        total: Array = (counts * self._weights[rows]) @ self._table[rows]
        norm = float(np.linalg.norm(total))
        return None if norm == 0.0 else total / norm

    def _rebuild(self, order: list[str | None]) -> None:
        """The tools' vectors again: the idf and the centre change with the catalog."""
        np = _np()
        live = sorted(t for t, n in self._df.items() if n > 0 and t in self._vectors)
        dimensions = len(next(iter(self._vectors.values()))) if self._vectors else 1
        table = (np.stack([self._vectors[t] for t in live]) if live
                 else np.zeros((0, dimensions), dtype=np.float32))
        self._table = table - table.mean(axis=0) if live else table
        self._row = {t: row for row, t in enumerate(live)}
        tools = len(self._ids) + 1
        self._weights = np.array([math.log(tools / (self._df[t] + 0.5)) for t in live],
                                 dtype=np.float32)
        matrix = np.zeros((len(order), dimensions), dtype=np.float32)
        for row, key in enumerate(order):
            vector = None if key is None or key not in self._ids else self._vector(self._ids[key])
            if vector is not None:
                matrix[row] = vector
        self._matrix, self._order = matrix, list(order)
