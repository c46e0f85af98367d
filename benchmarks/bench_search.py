"""Benchmark: tool-search quality and latency on the BFCL-derived evaluation set.

Loads ``search_eval/tools.jsonl`` (one tool per distinct function name, 1,000+ real function
definitions) and ``search_eval/queries.jsonl`` (natural user requests labelled with the function
that answers them), and reports recall@1, recall@5, MRR and median/p95 query latency for each
search configuration. The semantic configuration needs the ``semantic`` extra; ``--torch``
adds the same model run by sentence-transformers on torch (what the extra used before), and
the configuration without the ``search`` extra runs the pure-Python BM25.

    python benchmarks/bench_search.py [--limit N] [--torch]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import random
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from toolkeeper import Tool
from toolkeeper.toolbox import Toolbox, search
from toolkeeper.toolbox.search import SearchOptions

HERE = Path(__file__).resolve().parent / "search_eval"
tokenize = importlib.import_module("toolkeeper.toolbox.tokenize")  # the package's name is the function


def load() -> tuple[list[Tool], list[dict[str, Any]]]:
    seen: dict[str, Tool] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for line in (HERE / "tools.jsonl").open():
            raw = json.loads(line)
            if raw["name"] not in seen:
                seen[raw["name"]] = Tool(name=raw["name"], description=raw.get("description", ""),
                                         parameters=raw.get("parameters"))
    queries = [json.loads(line) for line in (HERE / "queries.jsonl").open()]
    return list(seen.values()), queries


def evaluate(toolbox: Toolbox, queries: list[dict[str, Any]]) -> dict[str, float]:
    toolbox.search("warm up the index", limit=5)
    hits1 = hits5 = 0
    reciprocal = 0.0
    latencies = []
    by_split: dict[str, list[int]] = {}
    for q in queries:
        start = time.perf_counter()
        results = toolbox.search(q["query"], limit=10)
        latencies.append(time.perf_counter() - start)
        names = [r.name for r in results]
        rank = names.index(q["tool"]) + 1 if q["tool"] in names else None
        hits1 += rank == 1
        hits5 += rank is not None and rank <= 5
        reciprocal += 1.0 / rank if rank else 0.0
        split = by_split.setdefault(q["id"].rsplit("_", 1)[0], [0, 0])
        split[0] += rank is not None and rank <= 5
        split[1] += 1
    if "-v" in sys.argv:
        print({k: round(h / n, 3) for k, (h, n) in by_split.items()}, file=sys.stderr)
    n = len(queries)
    latencies.sort()
    return {"recall@1": hits1 / n, "recall@5": hits5 / n, "mrr": reciprocal / n,
            "median_ms": statistics.median(latencies) * 1e3,
            "p95_ms": latencies[int(0.95 * (n - 1))] * 1e3}


def with_typos(queries: list[dict[str, Any]], seed: int = 7) -> list[dict[str, Any]]:
    """The same queries with one typo (two neighbouring letters swapped) in one long word each."""
    rng = random.Random(seed)
    out = []
    for q in queries:
        words = q["query"].split()
        long_words = [i for i, w in enumerate(words) if len(w) >= 6 and w.isalpha()]
        if long_words:
            i = rng.choice(long_words)
            w = words[i]
            j = rng.randrange(1, len(w) - 2)
            words[i] = w[:j] + w[j + 1] + w[j] + w[j + 2:]
        out.append({**q, "query": " ".join(words)})
    return out


class TorchEncoder:
    """The same model through sentence-transformers on torch, for comparison."""

    def __init__(self) -> None:
        from sentence_transformers import SentenceTransformer

        from toolkeeper.toolbox.encoder import default_model_dir

        self.model = SentenceTransformer(str(default_model_dir()), device="cpu")

    def encode(self, texts: list[str]) -> Any:
        return self.model.encode(list(texts), batch_size=64, normalize_embeddings=True,
                                 convert_to_numpy=True)


class PurePython:
    """Search as installed without the ``search`` extra: pure-Python BM25, difflib for typos,
    the light suffix stemmer."""

    def __enter__(self) -> None:
        self.saved = search._tantivy, search._rapidfuzz, tokenize._snowball
        search._tantivy = search._rapidfuzz = tokenize._snowball = lambda: None  # type: ignore
        tokenize._stem.cache_clear()

    def __exit__(self, *exc: object) -> None:
        search._tantivy, search._rapidfuzz, tokenize._snowball = self.saved  # type: ignore
        tokenize._stem.cache_clear()


def compare_encoders(queries: list[dict[str, Any]]) -> None:
    """One query embedding each way, taking turns query by query (the machine's load falls on
    both alike): the numpy encoder against sentence-transformers on torch."""
    from toolkeeper.toolbox.encoder import SentenceEncoder

    mine, torch = SentenceEncoder(), TorchEncoder()
    times: dict[str, list[float]] = {"numpy": [], "torch": []}
    for q in queries:
        for label, encoder in (("numpy", mine), ("torch", torch)):
            start = time.perf_counter()
            encoder.encode([q["query"]])
            times[label].append((time.perf_counter() - start) * 1e3)
        mine._cache.clear()
    print("\nOne query embedding (the same queries, taking turns):\n")
    print("| encoder | median ms | p95 ms |")
    print("|---|---:|---:|")
    for label, values in times.items():
        values.sort()
        print(f"| {label} | {statistics.median(values):.2f} | "
              f"{values[int(0.95 * (len(values) - 1))]:.2f} |")


def configurations(torch: bool) -> dict[str, SearchOptions]:
    configs = {"BM25 only": SearchOptions.bm25_only(), "BM25 + fuzzy + boosts": SearchOptions(),
               "BM25 + fuzzy + boosts, without the search extra": SearchOptions()}
    try:
        from toolkeeper.toolbox.semantic import EmbeddingScorer

        configs["BM25 + fuzzy + boosts + semantic (numpy)"] = SearchOptions(
            semantic=EmbeddingScorer())
        if torch:
            configs["BM25 + fuzzy + boosts + semantic (torch)"] = SearchOptions(
                semantic=EmbeddingScorer(encoder=TorchEncoder()))
    except ImportError as exc:
        print(f"semantic configuration skipped: {exc}", file=sys.stderr)
    return configs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=0, help="evaluate only the first N queries")
    parser.add_argument("-v", action="store_true", help="print recall@5 per BFCL category")
    parser.add_argument("--torch", action="store_true",
                        help="also run the model on torch (needs sentence-transformers)")
    args = parser.parse_args()
    tools, queries = load()
    if args.limit:
        queries = queries[: args.limit]
    print(f"{len(tools)} tools, {len(queries)} queries\n")
    print("| configuration | recall@1 | recall@5 | MRR | median ms | p95 ms | first search s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    configs = configurations(args.torch)
    for label, options in configs.items():
        with PurePython() if "without" in label else contextlib.nullcontext():
            toolbox = Toolbox(tools, search=options)
            start = time.perf_counter()
            toolbox.search("build the index", limit=5)
            built = time.perf_counter() - start
            m = evaluate(toolbox, queries)
        print(f"| {label} | {m['recall@1']:.3f} | {m['recall@5']:.3f} | {m['mrr']:.3f} | "
              f"{m['median_ms']:.3f} | {m['p95_ms']:.3f} | {built:.1f} |", flush=True)
    if args.torch:
        compare_encoders(queries)
    typos = with_typos(queries)
    print("\nThe same queries with one typo each (two letters of one long word swapped):\n")
    print("| configuration | recall@1 | recall@5 | MRR | median ms | p95 ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for label in ("BM25 only", "BM25 + fuzzy + boosts"):
        m = evaluate(Toolbox(tools, search=configs[label]), typos)
        print(f"| {label} | {m['recall@1']:.3f} | {m['recall@5']:.3f} | {m['mrr']:.3f} | "
              f"{m['median_ms']:.3f} | {m['p95_ms']:.3f} |")


if __name__ == "__main__":
    main()
