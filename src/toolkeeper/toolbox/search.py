"""Tool search: BM25 (tantivy) over several fields, fuzzy name matching (rapidfuzz), and boosts.

The index is built on the first search and then kept up to date incrementally: an added or
changed tool is written to the index and a removed one deleted; the next search commits the
pending writes. Disabled and hidden tools are filtered at query time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import tantivy
from rapidfuzz import fuzz, process

from .tokenize import tokenize

__all__ = ["SearchDoc", "SearchHit", "SearchIndex"]

FIELD_BOOSTS = {"name": 3.0, "tags": 2.0, "category": 1.5, "description": 1.0, "params": 0.6}
FUZZY_WEIGHT = 0.35
TAG_BOOST = 0.15
CATEGORY_BOOST = 0.15
_CANDIDATES = 60


@dataclass(frozen=True, slots=True)
class SearchDoc:
    """The searchable text of one tool, already split into fields."""

    name: str
    description: str = ""
    params: str = ""
    tags: tuple[str, ...] = ()
    category: str | None = None

    def tokens(self) -> dict[str, list[str]]:
        return {
            "name": tokenize(self.name, keep_stopwords=True),
            "description": tokenize(self.description),
            "params": tokenize(self.params),
            "tags": [t for tag in self.tags for t in tokenize(tag, keep_stopwords=True)],
            "category": tokenize((self.category or "").replace("/", " "), keep_stopwords=True),
        }


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One search result: the tool, its score and which signals matched (with their parts)."""

    name: str
    tool: Any
    score: float
    signals: dict[str, float] = field(default_factory=dict)


class SearchIndex:
    """A BM25 + fuzzy index of tool documents keyed by tool name."""

    def __init__(self) -> None:
        self._docs: dict[str, SearchDoc] = {}
        self._tokens: dict[str, dict[str, list[str]]] = {}
        self._index: Any = None
        self._writer: Any = None
        self._searcher: Any = None
        self._schema: Any = None
        self._dirty = False
        self._lock = threading.RLock()
        self._fuzzy_choices: dict[str, str] | None = None

    # -- updates -------------------------------------------------------------------------

    def upsert(self, key: str, doc: SearchDoc) -> None:
        with self._lock:
            self._docs[key] = doc
            self._tokens[key] = doc.tokens()
            self._fuzzy_choices = None
            if self._writer is not None:
                self._delete(key)
                self._write(key)

    def remove(self, key: str) -> None:
        with self._lock:
            if self._docs.pop(key, None) is None:
                return
            self._tokens.pop(key, None)
            self._fuzzy_choices = None
            if self._writer is not None:
                self._delete(key)

    def _write(self, key: str) -> None:
        fields = {name: " ".join(tokens) for name, tokens in self._tokens[key].items()}
        self._writer.add_document(tantivy.Document(key=key, **fields))
        self._dirty = True

    def _delete(self, key: str) -> None:
        self._writer.delete_documents_by_term("key", key)
        self._dirty = True

    def _build(self) -> None:
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("key", stored=True, tokenizer_name="raw")
        for name in FIELD_BOOSTS:
            builder.add_text_field(name, stored=False, tokenizer_name="whitespace")
        self._schema = builder.build()
        self._index = tantivy.Index(self._schema)
        self._writer = self._index.writer(heap_size=15_000_000, num_threads=1)
        for key in self._docs:
            self._write(key)

    def _ready_searcher(self) -> Any:
        if self._writer is None:
            self._build()
        if self._dirty or self._searcher is None:
            self._writer.commit()
            self._index.reload()
            self._searcher = self._index.searcher()
            self._dirty = False
        return self._searcher

    # -- queries -------------------------------------------------------------------------

    def search(
        self, query: str, *, limit: int = 5, allowed: Callable[[str], bool] | None = None,
        extra: Callable[[str, Iterable[str]], dict[str, float]] | None = None,
    ) -> list[tuple[str, float, dict[str, float]]]:
        """(key, score, signals) of the best ``limit`` documents for ``query``."""
        terms = list(dict.fromkeys(tokenize(query)))
        with self._lock:
            if not self._docs or not query.strip():
                return []
            bm25 = self._bm25(terms) if terms else {}
            fuzzy = self._fuzzy(query)
            candidates = set(bm25) | set(fuzzy)
            if allowed is not None:
                candidates = {k for k in candidates if allowed(k)}
            extra_scores = extra(query, candidates) if extra else {}
            candidates |= {k for k in extra_scores if allowed is None or allowed(k)}
            top = max(bm25.values(), default=0.0) or 1.0
            scored = [self._score(k, terms, bm25.get(k, 0.0) / top, fuzzy.get(k, 0.0),
                                  extra_scores.get(k)) for k in candidates]
        scored.sort(key=lambda item: (-item[1], item[0]))
        return scored[:limit]

    def _bm25(self, terms: list[str]) -> dict[str, float]:
        searcher = self._ready_searcher()
        query_cls, occur = tantivy.Query, tantivy.Occur
        clauses = [
            (occur.Should, query_cls.boost_query(
                query_cls.term_query(self._schema, field_name, term), boost))
            for term in terms for field_name, boost in FIELD_BOOSTS.items()
        ]
        hits = searcher.search(query_cls.boolean_query(clauses), _CANDIDATES).hits
        return {searcher.doc(address)["key"][0]: score for score, address in hits}

    def _fuzzy(self, query: str) -> dict[str, float]:
        if self._fuzzy_choices is None:
            self._fuzzy_choices = {k: " ".join(t["name"]) for k, t in self._tokens.items()}
        matches = process.extract(" ".join(tokenize(query, keep_stopwords=True)),
                                  self._fuzzy_choices, scorer=fuzz.token_set_ratio,
                                  limit=20, score_cutoff=60)
        return {key: score / 100.0 for _, score, key in matches}

    def _score(self, key: str, terms: list[str], bm25: float, fuzzy: float,
               semantic: float | None) -> tuple[str, float, dict[str, float]]:
        tokens = self._tokens[key]
        signals: dict[str, float] = {}
        if bm25:
            signals["bm25"] = round(bm25, 4)
        if fuzzy:
            signals["fuzzy"] = round(FUZZY_WEIGHT * fuzzy, 4)
        term_set = set(terms)
        if term_set & set(tokens["tags"]):
            signals["tag"] = TAG_BOOST
        if term_set & set(tokens["category"]):
            signals["category"] = CATEGORY_BOOST
        if semantic:
            signals["semantic"] = round(semantic, 4)
        return key, round(sum(signals.values()), 6), signals
