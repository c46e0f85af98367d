"""BM25 over several fields in pure Python: catalog search without the ``search`` extra.

The same scoring as the tantivy index of :mod:`toolkeeper.toolbox.search` — Okapi BM25
(k1 = 1.2, b = 0.75, idf = ln(1 + (N − n + 0.5) / (n + 0.5))) per field, each term's field score
times its boost, summed over terms and fields — on a dictionary of postings kept up to date as
tools are added and removed. Fine for catalogs of hundreds or a few thousand tools; the extra
is faster on larger ones (see docs/benchmarks.md).
"""

from __future__ import annotations

import heapq
import math
from collections import Counter, defaultdict

__all__ = ["FieldBM25"]

K1 = 1.2
B = 0.75


class FieldBM25:
    """Postings of tokenized fields by document key, scored with BM25."""

    def __init__(self) -> None:
        self._postings: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(dict))
        self._lengths: dict[str, dict[str, int]] = defaultdict(dict)
        self._totals: Counter[str] = Counter()
        self._terms: dict[str, dict[str, set[str]]] = {}  # key → field → its distinct terms

    def __len__(self) -> int:
        return len(self._terms)

    def add(self, key: str, fields: dict[str, list[str]]) -> None:
        self.remove(key)
        self._terms[key] = {}
        for name, tokens in fields.items():
            counts = Counter(tokens)
            for term, count in counts.items():
                self._postings[name][term][key] = count
            self._terms[key][name] = set(counts)
            self._lengths[name][key] = len(tokens)
            self._totals[name] += len(tokens)

    def remove(self, key: str) -> None:
        for name, terms in self._terms.pop(key, {}).items():
            self._totals[name] -= self._lengths[name].pop(key)
            postings = self._postings[name]
            for term in terms:
                del postings[term][key]
                if not postings[term]:
                    del postings[term]

    def search(self, weighted: list[tuple[str, float]], boosts: dict[str, float],
               limit: int) -> dict[str, float]:
        """The ``limit`` best keys for the (term, weight) pairs, field scores times ``boosts``."""
        scores: dict[str, float] = defaultdict(float)
        for name, boost in boosts.items():
            lengths = self._lengths.get(name)
            if not boost or not lengths:
                continue
            count = len(lengths)
            average = (self._totals[name] / count) or 1.0
            for term, weight in weighted:
                docs = self._postings[name].get(term)
                if not docs:
                    continue
                idf = math.log(1.0 + (count - len(docs) + 0.5) / (len(docs) + 0.5))
                for key, tf in docs.items():
                    norm = tf + K1 * (1.0 - B + B * lengths[key] / average)
                    scores[key] += boost * weight * idf * tf * (K1 + 1.0) / norm
        best = heapq.nlargest(limit, scores.items(), key=lambda item: (item[1], item[0]))
        return dict(best)
