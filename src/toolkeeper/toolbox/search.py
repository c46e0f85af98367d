"""Tool search: BM25 (tantivy) over several fields, fuzzy name matching (rapidfuzz), and boosts.

The index is built on the first search and then kept up to date incrementally: an added or
changed tool is written to the index and a removed one deleted; the next search commits the
pending writes. Disabled and hidden tools are filtered at query time.

Without the ``search`` extra the same signals come from the standard library: BM25 from
:mod:`toolkeeper.toolbox.bm25` and typo matching from ``difflib``.

Semantic search (sentence embeddings, the ``semantic`` extra) runs by default when the extra
and its model package are installed: the scorer is made at the first search, not before, and
it runs outside the index's lock, so adding or removing a tool never waits for the model.
"""

from __future__ import annotations

import difflib
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Literal, Protocol

from ..core.spec import ToolLike
from .bm25 import FieldBM25
from .semantic import default_scorer
from .tokenize import tokenize

if TYPE_CHECKING:
    import tantivy

__all__ = ["SearchDoc", "SearchHit", "SearchIndex", "SearchOptions", "SemanticScorer"]

FIELD_BOOSTS = {"name": 1.0, "tags": 1.0, "category": 1.0, "description": 1.0, "params": 1.0}
_CANDIDATES = 60


@dataclass(frozen=True, kw_only=True)
class SearchOptions:
    """How search combines its signals.

    Attributes:
        field_boosts: BM25 weight of each field.
        fuzzy_weight: Weight of fuzzy matches: a query word the index does not know (a typo,
            another spelling) is matched to the closest indexed word (0 turns it off).
        tag_boost: Added when a query word is one of the tool's tags.
        category_boost: Added when a query word is part of the tool's category.
        semantic: The embedding scorer fused with BM25: ``"auto"`` (the default) uses
            ``EmbeddingScorer()`` when the ``semantic`` extra and its model package are
            installed and ``TOOLKEEPER_SEMANTIC_SEARCH`` is not ``off``; ``None`` turns it off;
            or a scorer of your own (see ``toolkeeper.toolbox.semantic``).
        semantic_weight: Weight of the semantic similarity.
        semantic_floor: A tool no query word matches is a hit by meaning alone only from this
            cosine similarity up: below it the model's similarities are noise (unrelated
            sentences score 0 to 0.15), and "nothing matches" stays true for a query about
            nothing in the catalog. No loss of recall@5 on the evaluation set up to 0.3.
    """

    field_boosts: dict[str, float] = field(default_factory=lambda: dict(FIELD_BOOSTS))
    fuzzy_weight: float = 0.35
    tag_boost: float = 0.15
    category_boost: float = 0.15
    semantic: SemanticScorer | Literal["auto"] | None = "auto"
    semantic_weight: float = 6.0
    semantic_floor: float = 0.15

    @classmethod
    def bm25_only(cls) -> SearchOptions:
        return cls(fuzzy_weight=0.0, tag_boost=0.0, category_boost=0.0, semantic=None)


class SemanticScorer(Protocol):
    """What search asks of an embedding scorer (``EmbeddingScorer`` is one)."""

    def add(self, key: str, doc: SearchDoc) -> None: ...

    def remove(self, key: str) -> None: ...

    def scores(self, query: str, limit: int) -> dict[str, float]:
        """The ``limit`` most similar documents and their similarity (0 to 1)."""
        ...


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
    """One search result: the tool, its score and which signals matched (with their parts).

    It is a ``CapabilityEntry``: ``name``, ``description``, ``kind``
    and ``tags`` (and the ``category``)."""

    name: str
    tool: ToolLike
    score: float
    signals: dict[str, float] = field(default_factory=dict)
    tags: frozenset[str] = frozenset()
    category: str | None = None
    kind: Literal["local", "hosted", "provider-defined"] = "local"

    @property
    def description(self) -> str:
        return self.tool.description


@cache
def _tantivy() -> ModuleType | None:
    """tantivy when the ``search`` extra is installed; ``None`` selects the pure-Python BM25."""
    try:
        import tantivy
    except ImportError:
        return None
    return tantivy


@cache
def _rapidfuzz() -> ModuleType | None:
    """rapidfuzz when the ``search`` extra is installed; ``None`` selects ``difflib``."""
    try:
        import rapidfuzz
    except ImportError:
        return None
    return rapidfuzz


def _closest(term: str, vocabulary: list[str]) -> str | None:
    """The indexed word closest to ``term`` (similarity ≥ 85 of 100), or ``None``; the
    first in ``vocabulary``'s order among equals (``_Words.near`` keeps that order)."""
    rapidfuzz = _rapidfuzz()
    if rapidfuzz is None:
        close = difflib.get_close_matches(term, vocabulary, n=1, cutoff=0.85)
        return close[0] if close else None
    match = rapidfuzz.process.extractOne(term, vocabulary, scorer=rapidfuzz.fuzz.ratio,
                                         score_cutoff=85)
    return None if match is None else str(match[0])


class SearchIndex:
    """A BM25 + fuzzy index of tool documents keyed by tool name."""

    def __init__(self, options: SearchOptions | None = None) -> None:
        self.options = options or SearchOptions()
        self._docs: dict[str, SearchDoc] = {}
        self._tokens: dict[str, dict[str, list[str]]] = {}
        self._engine: _Engine | None = None  # the tantivy index, once built
        self._lock = threading.RLock()
        self._words: _Words | None = None  # what the index's words point to, once asked
        self._python: FieldBM25 | None = None  # the BM25 without the search extra
        given = self.options.semantic
        self._semantic: SemanticScorer | None = None if given == "auto" else given
        self._resolved = given != "auto"  # "auto" is resolved at the first search

    @property
    def backend(self) -> Literal["tantivy", "python"]:
        """Which BM25 runs: tantivy (the ``search`` extra) or the pure-Python one."""
        return "python" if _tantivy() is None else "tantivy"

    # -- updates -------------------------------------------------------------------------

    def upsert(self, key: str, doc: SearchDoc) -> None:
        with self._lock:
            self._docs[key] = doc
            self._tokens[key] = doc.tokens()
            self._words = None
            if self._semantic is not None:
                self._semantic.add(key, doc)
            if self._python is not None:
                self._python.add(key, self._tokens[key])
            if self._engine is not None:
                self._engine.delete(key)
                self._engine.write(key, self._tokens[key])

    def remove(self, key: str) -> None:
        with self._lock:
            if self._docs.pop(key, None) is None:
                return
            self._tokens.pop(key, None)
            self._words = None
            if self._semantic is not None:
                self._semantic.remove(key)
            if self._python is not None:
                self._python.remove(key)
            if self._engine is not None:
                self._engine.delete(key)

    def _ready_searcher(self, tantivy: ModuleType) -> tuple[tantivy.Searcher, tantivy.Schema]:
        if self._engine is None:
            self._engine = _Engine.build(tantivy, self.options.field_boosts, self._tokens)
        return self._engine.ready(), self._engine.schema

    # -- queries -------------------------------------------------------------------------

    def search(
        self, query: str, *, limit: int = 5, allowed: Callable[[str], bool] | None = None,
        semantic: bool = True,
    ) -> list[tuple[str, float, dict[str, float]]]:
        """(key, score, signals) of the best ``limit`` documents for ``query``.

        ``semantic=False`` ranks by words alone (a tool's name in an error message: quick,
        and never waits for the model)."""
        terms = [t for t in dict.fromkeys(tokenize(query)) if not t.isdigit()]
        if not query.strip() or not self._docs:
            return []
        meaning, closeness = self._meaning(query) if semantic else (None, None)
        with self._lock:
            if not self._docs:
                return []
            words = self._index_words()
            corrected = self._corrections(terms, words) if self.options.fuzzy_weight else {}
            bm25 = self._bm25(terms, corrected) if terms else {}
            fuzzy = words.fuzzy_hits(corrected)
            close = {k for k, v in (closeness or {}).items() if v >= self.options.semantic_floor}
            marks = words.marks(terms)
            top = max(bm25.values(), default=0.0) or 1.0
            parts = {k: (bm25.get(k, 0.0) / top, fuzzy.get(k, 0.0),
                         None if meaning is None else meaning.get(k, 0.0))
                     for k in (set(bm25) | close) & self._docs.keys()}
            rough = sorted(((self._rough(k, *part, marks), k) for k, part in parts.items()),
                           reverse=True)
            scored = [self._score(k, *parts[k], marks) for k in _shortlist(rough, limit, allowed)]
        scored.sort(key=lambda item: (-item[1], item[0]))
        return scored[:limit]

    def _scorer(self) -> SemanticScorer | None:
        """The semantic scorer; ``"auto"`` becomes one (fed every document) on first use."""
        with self._lock:
            if not self._resolved:
                self._resolved = True
                self._semantic = default_scorer()
                for key, doc in self._docs.items():
                    if self._semantic is not None:
                        self._semantic.add(key, doc)
            return self._semantic

    def _meaning(self, query: str) -> tuple[dict[str, float] | None, dict[str, float] | None]:
        """The semantic scores of ``query`` and what ``semantic_floor`` is held to (the
        model's cosine where the scorer tells it apart: ``EmbeddingScorer.ranked``); ``None``
        when no scorer runs. Computed outside the index's lock: embedding a large catalog
        never holds up an update."""
        scorer = self._scorer()
        if scorer is None:
            return None, None
        if self.options.semantic != "auto":
            return _ranked(scorer, query)
        try:
            return _ranked(scorer, query)
        except Exception as exc:  # the default scorer must never break search
            warnings.warn(f"semantic search is off for this catalog: the model failed ({exc}); "
                          "set TOOLKEEPER_SEMANTIC_SEARCH=off to skip it", RuntimeWarning,
                          stacklevel=4)
            with self._lock:
                self._semantic = None
            return None, None

    def _bm25(self, terms: list[str], corrected: dict[str, str]) -> dict[str, float]:
        weighted = [(t, 1.0) for t in terms if t not in corrected]
        weighted += [(c, self.options.fuzzy_weight) for c in corrected.values()]
        tantivy = _tantivy()
        if tantivy is None:
            if self._python is None:
                self._python = FieldBM25()
                for key, fields in self._tokens.items():
                    self._python.add(key, fields)
            return self._python.search(weighted, self.options.field_boosts, _CANDIDATES)
        searcher, schema = self._ready_searcher(tantivy)
        query_cls, occur = tantivy.Query, tantivy.Occur
        clauses = [
            (occur.Should, query_cls.boost_query(
                query_cls.term_query(schema, field_name, term), boost * weight))
            for term, weight in weighted
            for field_name, boost in self.options.field_boosts.items() if boost
        ]
        if not clauses:
            return {}
        hits = searcher.search(query_cls.boolean_query(clauses), _CANDIDATES).hits
        assert self._engine is not None  # made by _ready_searcher
        return {self._engine.key(address): score for score, address in hits}

    def _index_words(self) -> _Words:
        if self._words is None:
            self._words = _Words.of(self._tokens)
        return self._words

    def _corrections(self, terms: list[str], words: _Words) -> dict[str, str]:
        """Query words no tool mentions, mapped to the closest word of a tool name (typos)."""
        out = {}
        for term in terms:
            if term in words.known or len(term) < 4 or not term.isalpha():
                continue
            match = _closest(term, words.near(len(term)))
            if match is not None:
                out[term] = match
        return out

    def _rough(self, key: str, bm25: float, fuzzy: float, semantic: float | None,
               marks: tuple[set[str], set[str]]) -> float:
        """``_score``'s total without its rounding (within 2e-4 of it): cheap enough for every
        candidate, so that only the few that can reach the first ``limit`` are scored."""
        options = self.options
        total = bm25 + options.fuzzy_weight * fuzzy
        if options.tag_boost and key in marks[0]:
            total += options.tag_boost
        if options.category_boost and key in marks[1]:
            total += options.category_boost
        if semantic is not None:
            total += options.semantic_weight * max(semantic, 0.0)
        return total

    def _score(self, key: str, bm25: float, fuzzy: float, semantic: float | None,
               marks: tuple[set[str], set[str]]) -> tuple[str, float, dict[str, float]]:
        options = self.options
        signals: dict[str, float] = {}
        if bm25:
            signals["bm25"] = round(bm25, 4)
        if fuzzy:
            signals["fuzzy"] = round(options.fuzzy_weight * fuzzy, 4)
        if options.tag_boost and key in marks[0]:
            signals["tag"] = options.tag_boost
        if options.category_boost and key in marks[1]:
            signals["category"] = options.category_boost
        if semantic is not None:  # the model ran: say so on every hit, matched or not
            signals["semantic"] = round(options.semantic_weight * max(semantic, 0.0), 4)
        return key, round(sum(signals.values()), 6), signals


_ROUNDING = 1e-3
"""More than ``_rough`` can differ from ``_score``'s total (three parts rounded to 4 decimals,
the sum to 6): a candidate this far under the ``limit``-th rough total cannot be among the
first ``limit``."""


def _shortlist(rough: list[tuple[float, str]], limit: int,
               allowed: Callable[[str], bool] | None) -> list[str]:
    """The allowed candidates that can be among the first ``limit`` (``rough`` is sorted,
    best first): ``allowed`` is asked only until the ``limit``-th is passed."""
    out: list[str] = []
    floor = float("-inf")
    for total, key in rough:
        if total < floor:
            break
        if allowed is None or allowed(key):
            out.append(key)
            if len(out) == limit:
                floor = total - _ROUNDING
    return out


@dataclass(frozen=True)
class _Words:
    """The index's words and the tools they point to, built at the first search after a
    change: the name words typos are matched to, and which tools a name word, a tag word or a
    category word names (a lookup per query word instead of a pass over every tool)."""

    vocabulary: list[str]
    known: set[str]
    names: dict[str, set[str]]
    tags: dict[str, set[str]]
    categories: dict[str, set[str]]
    by_size: dict[int, list[str]] = field(default_factory=dict)  # ``near``'s answers

    @classmethod
    def of(cls, tokens: dict[str, dict[str, list[str]]]) -> _Words:
        by: dict[str, dict[str, set[str]]] = {"name": {}, "tags": {}, "category": {}}
        known: set[str] = set()
        for key, fields in tokens.items():
            for field_name, words in fields.items():
                known.update(words)
                if field_name in by:
                    for word in words:
                        by[field_name].setdefault(word, set()).add(key)
        return cls(sorted(by["name"]), known, by["name"], by["tags"], by["category"])

    def near(self, size: int) -> list[str]:
        """The name words a word of ``size`` letters can be similar to: both similarities
        (rapidfuzz's and difflib's) are 2 × matches / (both lengths), so lengths further apart
        than 15 % of their sum never reach 85 %. In the vocabulary's order."""
        found = self.by_size.get(size)
        if found is None:
            found = self.by_size[size] = [w for w in self.vocabulary
                                          if abs(len(w) - size) <= 0.15 * (len(w) + size) + 1e-9]
        return found

    def fuzzy_hits(self, corrected: dict[str, str]) -> dict[str, float]:
        return {key: 1.0 for word in set(corrected.values()) for key in self.names.get(word, ())}

    def marks(self, terms: list[str]) -> tuple[set[str], set[str]]:
        """The tools one of ``terms`` is a tag word of, and a category word of."""
        empty: set[str] = set()
        return (empty.union(*(self.tags.get(t, empty) for t in terms)),
                empty.union(*(self.categories.get(t, empty) for t in terms)))


def _ranked(scorer: SemanticScorer, query: str) -> tuple[dict[str, float], dict[str, float]]:
    """A scorer's scores and closeness: ``ranked`` when it has one, else its scores twice."""
    ranked = getattr(scorer, "ranked", None)
    if ranked is not None:
        both: tuple[dict[str, float], dict[str, float]] = ranked(query, _CANDIDATES)
        return both
    scores = scorer.scores(query, _CANDIDATES)
    return scores, scores


@dataclass
class _Engine:
    """A ``SearchIndex``'s tantivy index (the ``search`` extra): documents written and deleted
    as they change, committed when the next search needs them."""

    module: ModuleType
    schema: tantivy.Schema
    index: tantivy.Index
    writer: tantivy.IndexWriter
    searcher: tantivy.Searcher | None = None
    dirty: bool = False
    keys: dict[tuple[int, int], str] = field(default_factory=dict)  # the searcher's documents

    @classmethod
    def build(cls, module: ModuleType, boosts: dict[str, float],
              tokens: dict[str, dict[str, list[str]]]) -> _Engine:
        builder = module.SchemaBuilder()
        builder.add_text_field("key", stored=True, tokenizer_name="raw")
        for name in boosts:
            builder.add_text_field(name, stored=False, tokenizer_name="whitespace")
        schema = builder.build()
        index = module.Index(schema)
        engine = cls(module, schema, index, index.writer(heap_size=15_000_000, num_threads=1))
        for key, fields in tokens.items():
            engine.write(key, fields)
        return engine

    def write(self, key: str, tokens: dict[str, list[str]]) -> None:
        fields = {name: " ".join(words) for name, words in tokens.items()}
        self.writer.add_document(self.module.Document(key=key, **fields))
        self.dirty = True

    def delete(self, key: str) -> None:
        self.writer.delete_documents_by_term("key", key)
        self.dirty = True

    def ready(self) -> tantivy.Searcher:
        """A searcher that sees every write so far."""
        if self.dirty or self.searcher is None:
            self.writer.commit()
            self.index.reload()
            self.searcher = self.index.searcher()
            self.keys = {}
            self.dirty = False
        return self.searcher

    def key(self, address: tantivy.DocAddress) -> str:
        """The key of a document the current searcher found (its stored field read once)."""
        place = (address.segment_ord, address.doc)
        found = self.keys.get(place)
        if found is None:
            assert self.searcher is not None
            found = self.keys[place] = self.searcher.doc(address)["key"][0]
        return found
