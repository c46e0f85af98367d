"""Benchmark: what protecting a workspace costs a ``shell`` call — the walk that finds every
protected entry at any depth, and the copy-on-write view the command writes through.

On a small workspace and on a generated tree of ~10,000 directories (50,000 files): a ``shell``
call that runs ``true``, one that writes a file (applied after the run), and the walk alone.
Median of repeated runs, each kind taking turns, so a busy machine weighs on all alike.

    python benchmarks/bench_protect.py [--runs 30]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from toolkeeper.builtins import SecurityPolicy
from toolkeeper.builtins.shell import shell_tool
from toolkeeper.sandbox import UNPRIVILEGED_UID, probe


def tree(root: Path) -> None:
    """22 × 22 × 21 directories (10,164, with their parents 10,671), five files in each leaf."""
    for a in range(22):
        for b in range(22):
            for c in range(21):
                leaf = root / f"d{a}" / f"e{b}" / f"f{c}"
                leaf.mkdir(parents=True)
                for i in range(5):
                    (leaf / f"file{i}.txt").write_text("x")


def workspace(base: Path, name: str, *, big: bool) -> Path:
    root = base / name
    root.mkdir()
    (root / "notes.txt").write_text("notes\n")
    if big:
        tree(root)
    if os.geteuid() == 0:
        for path in [root, *root.rglob("*")]:
            os.chown(path, UNPRIVILEGED_UID, UNPRIVILEGED_UID, follow_symlinks=False)
    return root


def scanner(root: Path) -> Callable[[], object] | None:
    """The walk alone, where this version of toolkeeper has it."""
    try:
        from toolkeeper.builtins.scan import Scanner
    except ImportError:
        return None
    scan = Scanner(SecurityPolicy(workspace=root))
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    return lambda: scan.scan(fd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    if not probe().available:
        sys.exit(f"no sandbox here: {probe().detail}")
    base = Path(tempfile.mkdtemp(prefix="tk-bench-"))
    base.chmod(0o755)
    cases: dict[str, Callable[[], object]] = {}
    for name, big in (("small workspace", False), ("10,000 directories", True)):
        root = workspace(base, name.replace(" ", "-").replace(",", ""), big=big)
        shell = shell_tool(SecurityPolicy(workspace=root, autonomy="full"))
        cases[f"shell `true`, {name}"] = lambda s=shell: s.run_raw({"command": "true"})
        cases[f"shell `echo x > out.txt`, {name}"] = (
            lambda s=shell: s.run_raw({"command": "echo x > out.txt"}))
        walk = scanner(root)
        if walk is not None:
            cases[f"the walk alone, {name}"] = walk
    for run in cases.values():  # warm-up: caches, the first sandbox
        run()
    times: dict[str, list[float]] = {label: [] for label in cases}
    for _ in range(args.runs):
        for label, run in cases.items():
            start = time.perf_counter()
            run()
            times[label].append((time.perf_counter() - start) * 1000)
    print(f"median of {args.runs} runs, Python {sys.version.split()[0]}, uid {os.geteuid()}\n")
    print("| measurement | median ms | min ms |")
    print("|---|---:|---:|")
    for label, values in times.items():
        print(f"| {label} | {statistics.median(values):.1f} | {min(values):.1f} |")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
