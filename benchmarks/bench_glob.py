"""Benchmark: a glob's cost per path, as ``glob_search`` pays it over a walk of the workspace.

About 100,000 workspace-relative paths are generated from a fixed seed, shaped like a real
monorepo (``src/``, ``tests/``, ``docs/``, a ``node_modules/`` tree, test files named
``test_*.py`` and ``*.test.ts``). For each glob, four ways are timed over all the paths:

- *old regex*: the regular expression globs were turned into before the matcher was bounded
  (``tests/builtins/test_glob.py``'s ``reference``); not run where it is exponential;
- *NFA*: the bit-parallel automaton alone (``Glob._simulate``), what ``match`` ran before for
  every glob whose regular expression does not backtrack boundedly;
- *before*: what ``Glob.match`` did before the deterministic automaton (the regular expression
  where it backtracks boundedly, else the NFA);
- *now*: ``Glob.match`` (the regular expression where it backtracks boundedly, else the
  glob's longest literal run looked for with ``in``, then the deterministic automaton built
  lazily over the NFA's sets, bounded, with the NFA past the bound);
- *DFA alone*: the deterministic automaton without the literal run's check first (what a path
  that holds the run costs), for every glob (``match`` reads it only where there is no regex).

Each round compiles the glob again (as each ``glob_search`` call does, so *now* includes
building the deterministic automaton's states) and reads every path once; the ways take turns,
in an order that alternates between rounds, and each figure is the median over the rounds of
the CPU µs per path (the process's CPU time: on a machine shared with other work, time spent
waiting for a core is not counted). All ways must give the same answers, or the script stops.

    python benchmarks/bench_glob.py [--rounds 5] [--paths 100000]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import random
import re
import statistics
import sys
import time
from collections.abc import Callable

from toolkeeper.builtins.search import compile_glob

GLOBS = [
    ("**/*test*", "two * in one part"),
    ("*.py", "common"),
    ("src/**/*.py", "common"),
    ("**/a*b*c*", "three * in one part"),
    ("*a" * 14 + "b", "hostile: old regex exponential"),
    ("**a" + "?" * 20 + "/**", "hostile: DFA of 2^20 states"),
]
EXPONENTIAL = {"*a" * 14 + "b"}

_DIRS = ["core", "api", "utils", "models", "views", "handlers", "internal", "components",
         "hooks", "services", "lib", "cmd", "pkg", "fixtures", "config", "auth", "storage",
         "parser", "client", "server", "common", "data", "ui", "widgets", "routes", "schemas"]
_WORDS = ["user", "config", "main", "index", "parser", "server", "client", "model", "view",
          "helper", "router", "auth", "data", "cache", "store", "types", "schema", "request",
          "event", "handler", "session", "token", "query", "format", "loader", "manager", "app",
          "item", "list", "base", "error", "util", "context", "state", "table", "graph"]
_TOP = [  # (top directory, share of the files, extensions)
    ("src", 30, [".py", ".py", ".ts", ".tsx", ".go", ".rs", ".json"]),
    ("tests", 12, [".py", ".py", ".ts", ".snap", ".json"]),
    ("docs", 5, [".md", ".md", ".rst", ".png", ".svg"]),
    ("node_modules", 35, [".js", ".js", ".d.ts", ".json", ".md", ".map", ""]),
    ("packages", 10, [".ts", ".tsx", ".js", ".json", ".css"]),
    ("scripts", 2, [".sh", ".py", ""]),
    ("build", 6, [".o", ".js", ".map", ".html"]),
]


def _name(rng: random.Random, top: str, ext: str) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.choice((1, 1, 2, 2, 3)))]
    style = rng.random()
    stem = (words[0] + "".join(w.title() for w in words[1:]) if style < 0.3
            else "-".join(words) if style < 0.45 else "_".join(words))
    if top == "tests" and ext == ".py":
        stem = f"test_{stem}"
    elif ext in (".ts", ".tsx", ".js") and rng.random() < 0.12:
        stem = f"{stem}.test"
    return stem + ext


def workspace_paths(count: int, seed: int = 20261129) -> list[str]:
    """``count`` paths of a monorepo-shaped workspace, the same for the same seed."""
    rng = random.Random(seed)
    tops, weights = [t[0] for t in _TOP], [t[1] for t in _TOP]
    exts = {t[0]: t[2] for t in _TOP}
    paths = [f"{rng.choice(_WORDS)}{ext}" for ext in (".py", ".md", ".toml", ".cfg", "")
             for _ in range(count // 1000)]  # files at the top: setup.py, README.md
    while len(paths) < count:
        top = rng.choices(tops, weights)[0]
        parts = [top]
        if top == "node_modules":
            parts.append(rng.choice(["@types/", "@babel/", ""]) + rng.choice(_WORDS)
                         + rng.choice(["", "-js", "-core", "-utils"]))
        depth = rng.choice((0, 1, 1, 2, 2, 2, 3, 3, 4, 5, 7))
        parts += [rng.choice(_DIRS) for _ in range(depth)]
        # several files per directory, as a walk meets them
        for _ in range(rng.randint(1, 12)):
            paths.append("/".join([*parts, _name(rng, top, rng.choice(exts[top]))]))
    return paths[:count]


def reference(pattern: str) -> re.Pattern[str]:
    """The glob's regular expression as it was built before the matcher was bounded."""
    regex = {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}
    out, i = [], 0
    while i < len(pattern):
        token = ("**/" if pattern.startswith("**/", i) else "**" if pattern.startswith("**", i)
                 else pattern[i])
        out.append(regex.get(token) or re.escape(token))
        i += len(token)
    return re.compile("".join(out) + r"\Z")


def ways(pattern: str) -> dict[str, Callable[[], Callable[[str], object]]]:
    """Each way's matcher, made afresh for a round."""
    def before() -> Callable[[str], object]:
        glob = compile_glob(pattern)
        regex = glob._regex
        return (lambda p: regex.match(p) is not None) if regex is not None else glob._simulate

    def old() -> Callable[[str], object]:
        regex = reference(pattern)
        return lambda p: regex.match(p) is not None

    found: dict[str, Callable[[], Callable[[str], object]]] = {}
    if pattern not in EXPONENTIAL:
        found["old regex"] = old
    found["NFA"] = lambda: compile_glob(pattern)._simulate
    found["before"] = before
    found["now"] = lambda: compile_glob(pattern).match
    found["DFA alone"] = lambda: compile_glob(pattern)._dfa.match
    return found


def one_round(make: Callable[[], Callable[[str], object]], paths: list[str]) -> tuple[float, int]:
    """CPU µs per path (compiling included) and the count of matches."""
    began = time.process_time()
    match = make()
    hits = sum(1 for p in paths if match(p))
    return (time.process_time() - began) / len(paths) * 1e6, hits


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            return next(line.split(":", 1)[1].strip() for line in info
                        if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "cpu unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--paths", type=int, default=100_000)
    args = parser.parse_args()
    paths = workspace_paths(args.paths)
    began, load = datetime.datetime.now(datetime.UTC), os.getloadavg()[0]
    rows = []
    for pattern, kind in GLOBS:
        makers = ways(pattern)
        times: dict[str, list[float]] = {name: [] for name in makers}
        hits: set[int] = set()
        for round_ in range(args.rounds):
            for name in list(makers) if round_ % 2 == 0 else reversed(makers):
                seconds, count = one_round(makers[name], paths)
                times[name].append(seconds)
                hits.add(count)
        if len(hits) != 1:
            raise SystemExit(f"the ways disagree on {pattern!r}: {sorted(hits)} matches")
        glob = compile_glob(pattern)
        for p in paths:
            glob.match(p)
        states, transitions = glob._dfa.size
        engine = ("re" if glob._regex is not None
                  else f"needle {glob._needle!r}, DFA {states} states, {transitions} transitions")
        rows.append((pattern, kind, engine, hits.pop(),
                     {name: statistics.median(t) for name, t in times.items()}))
    print(f"{began:%Y-%m-%d %H:%M} UTC; {platform.system()} {platform.release()} "
          f"{platform.machine()}, {cpu_model()}, {os.cpu_count()} cores; "
          f"Python {sys.version.split()[0]}; load average {load:.2f} at the start, "
          f"{os.getloadavg()[0]:.2f} at the end; {len(paths):,} paths of "
          f"{statistics.mean(map(len, paths)):.1f} characters on average; {args.rounds} "
          f"alternating rounds (median)\n")
    print("| glob | kind | now runs on | matches | old regex µs | NFA µs | before µs | now µs "
          "| DFA alone µs | now ÷ old regex | now ÷ before | DFA alone ÷ NFA |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for pattern, kind, engine, count, us in rows:
        old = us.get("old regex")
        old_us, over_old = (f"{old:.2f}", f"{us['now'] / old:.2f}x") if old else ("not run", "—")
        print(f"| `{pattern}` | {kind} | {engine} | {count:,} | {old_us} | {us['NFA']:.2f} | "
              f"{us['before']:.2f} | {us['now']:.2f} | {us['DFA alone']:.2f} | {over_old} | "
              f"{us['now'] / us['before']:.3f}x | {us['DFA alone'] / us['NFA']:.3f}x |")

if __name__ == "__main__":
    main()
