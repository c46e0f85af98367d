"""Benchmark: content_search against bare ripgrep, shell start-up against bare ``sh -c true``.

Side by side in one run on a generated tree of source files. Median of repeated runs.

    python benchmarks/bench_builtins.py [--files 2000] [--runs 30]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from toolkeeper.builtins import SecurityPolicy
from toolkeeper.builtins.search import search_tools
from toolkeeper.builtins.shell import shell_tool
from toolkeeper.sandbox import UNPRIVILEGED_UID, probe


def tree(root: Path, files: int) -> None:
    for i in range(files):
        folder = root / f"pkg{i % 40}"
        folder.mkdir(exist_ok=True)
        body = "\n".join(f"def function_{i}_{j}(value):\n    return value * {j}  # helper"
                         for j in range(30))
        if i % 97 == 0:
            body += "\n# TODO: needle to find\n"
        (folder / f"module_{i}.py").write_text(body)


def median_ms(fn: object, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="tk-bench-"))
    base.chmod(0o755)
    ws = base / "ws"
    ws.mkdir()
    tree(ws, args.files)
    if os.geteuid() == 0:
        for path in [ws, *ws.rglob("*")]:
            os.chown(path, UNPRIVILEGED_UID, UNPRIVILEGED_UID)
    policy = SecurityPolicy(workspace=ws)
    search = next(t for t in search_tools(policy) if t.name == "content_search")
    rg = shutil.which("rg")
    rows = []
    if rg:
        bare = median_ms(lambda: subprocess.run([rg, "-n", "needle", str(ws)], capture_output=True,
                                                check=False), args.runs)
        ours = median_ms(lambda: search.run_raw({"pattern": "needle", "limit": 1000}), args.runs)
        rows.append(("content_search vs bare `rg -n needle`", ours, bare))
    if probe().available:
        shell = shell_tool(policy)
        bare = median_ms(lambda: subprocess.run(["sh", "-c", "true"], check=False), args.runs)
        ours = median_ms(lambda: shell.run_raw({"command": "true"}), args.runs)
        rows.append(("shell `true` (bwrap sandbox) vs bare `sh -c true`", ours, bare))
    print(f"{args.files} files, median of {args.runs} runs, Python {sys.version.split()[0]}\n")
    print("| measurement | toolkeeper ms | bare ms | ratio | difference ms |")
    print("|---|---:|---:|---:|---:|")
    for label, ours, bare in rows:
        print(f"| {label} | {ours:.2f} | {bare:.2f} | {ours / bare:.2f}x | {ours - bare:.2f} |")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
