"""Benchmark: tool-search quality and latency on the BFCL-derived evaluation set.

Loads ``search_eval/tools.jsonl`` (one tool per distinct function name, 1,000+ real function
definitions) and ``search_eval/queries.jsonl`` (natural user requests labelled with the function
that answers them), and reports recall@1, recall@5 and MRR for each search configuration, on
the tuning half (queries at even positions of the file: every weight was chosen there), the
held-out half (odd positions: never used to choose anything) and all. Latency is measured
separately, the configurations taking turns query by query (a busy machine's load falls on
all alike), as the median of the per-round medians (and 99th percentiles) of ``--rounds``
rounds. The semantic configurations need the ``semantic`` extra and its model package: the
default runs the model's graph made int8 on ONNX Runtime and adds the token vectors' similarity
(``toolbox/tokenvectors.py``), the next the same graph in a session with ONNX Runtime's fused
kernels (the default before), the next the default without token vectors, the others the float
graph there and the numpy forward pass (with token vectors); ``--torch`` adds the same
model run by sentence-transformers on torch, and the configuration without the ``search``
extra runs the pure-Python BM25. ``--first-search`` times building the index and embedding
the catalog in a fresh process, with an empty and then a filled embedding cache.

    python benchmarks/bench_search.py [--limit N] [--rounds R] [--torch] [--first-search]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from snowballstemmer.english_stemmer import EnglishStemmer

from toolkeeper import Tool
from toolkeeper.toolbox import Toolbox, search, semantic
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


def ranks(toolbox: Toolbox, queries: list[dict[str, Any]]) -> list[int | None]:
    """The rank of each query's labelled tool among the first 10 hits (None: not there)."""
    out = []
    for q in queries:
        names = [r.name for r in toolbox.search(q["query"], limit=10)]
        out.append(names.index(q["tool"]) + 1 if q["tool"] in names else None)
    return out


def quality(found: list[int | None]) -> dict[str, float]:
    n = len(found) or 1
    return {"recall@1": sum(r == 1 for r in found) / n,
            "recall@5": sum(r is not None and r <= 5 for r in found) / n,
            "mrr": sum(1.0 / r for r in found if r) / n}


def halves(found: list[int | None]) -> dict[str, dict[str, float]]:
    """Quality on the tuning half (even positions), the held-out half (odd) and all."""
    return {"tuning": quality(found[0::2]), "held-out": quality(found[1::2]),
            "all": quality(found)}


GIVEN: list[Any] = []  # encoders made here (not shared through semantic._ENCODERS)


def forget_queries() -> None:
    """Empty the encoders' text caches, so every timed search embeds its query (the tools'
    vectors are the scorer's own, not in these caches)."""
    for encoder in [*semantic._ENCODERS.values(), *GIVEN]:
        encoder._cache.clear()


def fused_int8() -> Any:
    """The default's int8 graph in a session with all of ONNX Runtime's graph optimisations
    (its fused int8 kernels), as the default ran it before."""
    from toolkeeper.toolbox.embedcache import default_cache_dir
    from toolkeeper.toolbox.onnxencoder import OnnxSentenceEncoder, default_onnx_model, int8_graph

    encoder = OnnxSentenceEncoder(onnx_file=int8_graph(default_onnx_model(), default_cache_dir()))
    GIVEN.append(encoder)
    return encoder


def latencies(boxes: dict[str, Toolbox], queries: list[dict[str, Any]],
              rounds: int) -> dict[str, tuple[float, float]]:
    """(median, p99) ms per search of each configuration: the configurations take turns
    query by query, in a rotating order; the figure is the median over rounds of each round's
    median (and p99)."""
    medians: dict[str, list[float]] = {label: [] for label in boxes}
    p99s: dict[str, list[float]] = {label: [] for label in boxes}
    for _ in range(rounds):
        times: dict[str, list[float]] = {label: [] for label in boxes}
        labels = list(boxes)
        for n, q in enumerate(queries):
            # the order rotates query by query: no configuration always runs after the ones
            # without the model (whose turn leaves the model's weights out of the CPU caches)
            for label in labels[n % len(labels):] + labels[:n % len(labels)]:
                box = boxes[label]
                forget_queries()
                with PurePython() if "without" in label else contextlib.nullcontext():
                    start = time.perf_counter()
                    box.search(q["query"], limit=10)
                    times[label].append((time.perf_counter() - start) * 1e3)
        for label, values in times.items():
            values.sort()
            medians[label].append(statistics.median(values))
            p99s[label].append(values[int(0.99 * (len(values) - 1))])
    return {label: (statistics.median(medians[label]), statistics.median(p99s[label]))
            for label in boxes}


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
    and Snowball stemming from snowballstemmer's pure-Python stemmer instead of PyStemmer's."""

    def __enter__(self) -> None:
        self.saved = search._tantivy, search._rapidfuzz, tokenize._stemmer
        search._tantivy = search._rapidfuzz = lambda: None  # type: ignore
        tokenize._stemmer = lambda: EnglishStemmer().stemWord  # type: ignore
        tokenize._stem.cache_clear()

    def __exit__(self, *exc: object) -> None:
        search._tantivy, search._rapidfuzz, tokenize._stemmer = self.saved  # type: ignore
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
    words = SearchOptions(semantic=None)
    configs = {"BM25 only": SearchOptions.bm25_only(),
               "words: BM25 + fuzzy + boosts ([search])": words,
               "words, without the search extra (core only)": words}
    try:
        from toolkeeper.toolbox.semantic import EmbeddingScorer

        configs["words + meaning + token vectors, the model int8 on ONNX Runtime (default with "
                "[search,semantic])"] = SearchOptions(semantic=EmbeddingScorer(runtime="onnx-int8"))
        configs["the same, the int8 graph run with ONNX Runtime's fused kernels (the default "
                "before)"] = SearchOptions(semantic=EmbeddingScorer(encoder=fused_int8(),
                                                                    cache=False))
        configs["words + meaning, the model int8 on ONNX Runtime, no token vectors"] = \
            SearchOptions(semantic=EmbeddingScorer(runtime="onnx-int8", token_weight=0))
        configs["words + meaning, the model's float graph on ONNX Runtime"] = SearchOptions(
            semantic=EmbeddingScorer(runtime="onnx"))
        configs["words + meaning, the model on numpy"] = SearchOptions(
            semantic=EmbeddingScorer(runtime="numpy"))
        if torch:
            configs["words + meaning, the model on torch"] = SearchOptions(
                semantic=EmbeddingScorer(encoder=TorchEncoder(), cache=False))
    except ImportError as exc:
        print(f"semantic configuration skipped: {exc}", file=sys.stderr)
    return configs


def build(configs: dict[str, SearchOptions], tools: list[Tool]) -> dict[str, Toolbox]:
    """A toolbox per configuration, its index built (and its catalog embedded)."""
    boxes = {}
    for label, options in configs.items():
        with PurePython() if "without" in label else contextlib.nullcontext():
            boxes[label] = Toolbox(tools, search=options)
            boxes[label].search("build the index", limit=5)
    return boxes


def first_search() -> None:
    """Time one fresh process's first search (index and embeddings) with an empty embedding
    cache, then with the cache that run filled."""
    here = str(Path(__file__).resolve().parent)
    child = (f"import sys, time; sys.path.insert(0, {here!r}); from bench_search import load; "
             "from toolkeeper.toolbox import Toolbox; tools, _ = load(); box = Toolbox(tools); "
             "t = time.perf_counter(); hit = box.search('build the index'); "
             "print(round(time.perf_counter() - t, 2), '|', ', '.join(sorted(hit[0].signals)))")
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TOOLKEEPER_CACHE_DIR": cache}
        for label in ("empty cache", "filled cache"):
            done = subprocess.run([sys.executable, "-c", child], env=env, check=True,
                                  capture_output=True, text=True)
            seconds, signals = done.stdout.strip().split(" | ")
            print(f"| first search of a fresh process, {label} | {seconds} s | {signals} |")


def machine() -> str:
    """The date, Python, cores, CPU and the BLAS kernel numpy runs (OPENBLAS_CORETYPE can
    force an older one than the CPU's)."""
    import numpy  # noqa: F401  (loads the BLAS that threadpoolctl reports)
    from threadpoolctl import threadpool_info

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text(
        ).splitlines() if line.startswith("model name")), "?") if Path("/proc/cpuinfo").exists() \
        else "?"
    blas = ", ".join(f"{i.get('internal_api')} {i.get('architecture')}" for i in threadpool_info())
    return (f"{time.strftime('%Y-%m-%d')}, Python {sys.version.split()[0]}, {os.cpu_count()} "
            f"cores, {cpu}, BLAS: {blas or 'none'}")


def table(rows: dict[str, dict[str, dict[str, float]]], timing: dict[str, tuple[float, float]]
          ) -> None:
    timed = " median ms | p99 ms |" if timing else ""
    print("| configuration | recall@5 tuning | recall@5 held-out | recall@5 all | recall@1 all "
          f"| MRR all |{timed}")
    print("|---|---:|---:|---:|---:|---:|" + ("---:|---:|" if timing else ""))
    for label, m in rows.items():
        times = " {:.3f} | {:.3f} |".format(*timing[label]) if label in timing else ""
        print(f"| {label} | {m['tuning']['recall@5']:.3f} | {m['held-out']['recall@5']:.3f} | "
              f"{m['all']['recall@5']:.3f} | {m['all']['recall@1']:.3f} | {m['all']['mrr']:.3f} "
              f"|{times}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=0, help="evaluate only the first N queries")
    parser.add_argument("--rounds", type=int, default=3, help="latency rounds (interleaved)")
    parser.add_argument("--torch", action="store_true",
                        help="also run the model on torch (needs sentence-transformers)")
    parser.add_argument("--first-search", action="store_true",
                        help="time a fresh process's first search, cache empty and filled")
    args = parser.parse_args()
    tools, queries = load()
    if args.limit:
        queries = queries[: args.limit]
    print(f"{len(tools)} tools, {len(queries)} queries; {machine()}; "
          f"load average {os.getloadavg()}\n")
    if args.first_search:
        first_search()
        return
    boxes = build(configurations(args.torch), tools)
    rows = {}
    for label, box in boxes.items():
        with PurePython() if "without" in label else contextlib.nullcontext():
            rows[label] = halves(ranks(box, queries))
    timing = latencies(boxes, queries, args.rounds)
    table(rows, timing)
    print(f"\nload average after: {os.getloadavg()}")
    if args.torch:
        compare_encoders(queries)
    typos = with_typos(queries)
    print("\nThe same queries with one typo each (two letters of one long word swapped):\n")
    words = {k: v for k, v in boxes.items() if k.startswith(("BM25", "words:"))}
    table({label: halves(ranks(box, typos)) for label, box in words.items()}, {})


if __name__ == "__main__":
    main()
