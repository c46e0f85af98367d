"""Benchmark: what a plain install brings — toolkeeper's core against its peers.

For each package, a fresh virtual environment under a temporary directory, one
``pip install <package>`` (toolkeeper's from a wheel built from this checkout; its dependencies
and the peers' from the package index), then:

- **packages**: distributions installed, pip and setuptools left out;
- **installed size**: ``site-packages`` minus that of an empty environment (bytes on disk);
- **import time**: ``python -X importtime -c "import <module>"``, the cumulative time of the
  top-level module, median of ``--runs`` fresh processes; the packages take turns, one process
  each per round, so a busy machine weighs on all of them alike.

    python benchmarks/bench_install.py [--runs 7] [--keep DIR]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEERS = {  # label → (pip requirement, module imported)
    "pydantic-ai-slim": ("pydantic-ai-slim", "pydantic_ai"),
    "openai-agents": ("openai-agents", "agents"),
    "fastmcp": ("fastmcp", "fastmcp"),
}
_BASE = {"pip", "setuptools", "wheel"}


def _run(*args: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd,
                          check=False)
    if done.returncode:
        sys.exit(f"{' '.join(map(str, args))} failed:\n{done.stderr[-2000:]}")
    return done.stdout + done.stderr


def _venv(where: Path) -> Path:
    _run(sys.executable, "-m", "venv", where)
    return where / "bin" / "python"


def _site(python: Path) -> Path:
    return Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
                .strip())


def _size(path: Path) -> int:
    return sum(f.lstat().st_size for f in path.rglob("*") if f.is_file() or f.is_symlink())


def _dists(python: Path) -> list[str]:
    out = _run(python, "-c", "import importlib.metadata as m; "
               "print('\\n'.join(sorted({d.metadata['Name'].lower() for d in m.distributions()})))")
    return [name for name in out.split() if name not in _BASE]


def _import_ms(python: Path, module: str) -> float:
    out = _run(python, "-X", "importtime", "-c", f"import {module}")
    line = next(ln for ln in out.splitlines() if re.search(rf"\|\s*{re.escape(module)}$", ln))
    return int(line.split("|")[1]) / 1000


def measure(label: str, requirement: str, module: str, base: int,
            work: Path) -> dict[str, object]:
    python = _venv(work / label)
    _run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check", requirement)
    dists = _dists(python)
    return {"label": label, "packages": len(dists), "names": dists, "python": python,
            "module": module, "mb": (_size(_site(python)) - base) / 1e6, "times": []}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="import-time runs per package")
    parser.add_argument("--keep", type=Path, help="build the environments here and keep them")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="tk-install-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        base = _size(_site(_venv(work / "empty")))
        _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", work / "dist", ROOT)
        wheel = next((work / "dist").glob("toolkeeper-*.whl"))
        rows = [measure("toolkeeper (core)", str(wheel), "toolkeeper", base, work)]
        rows += [measure(label, req, mod, base, work) for label, (req, mod) in PEERS.items()]
        for _ in range(args.runs):
            for row in rows:
                row["times"].append(_import_ms(row["python"], row["module"]))  # type: ignore
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"Python {sys.version.split()[0]}\n")
    print("| install | packages | installed MB | import ms |")
    print("|---|---:|---:|---:|")
    for row in rows:
        ms = statistics.median(row["times"])  # type: ignore[arg-type]
        print(f"| {row['label']} | {row['packages']} | {row['mb']:.1f} | {ms:.0f} |")
    print()
    for row in rows:
        print(f"{row['label']}: {', '.join(row['names'])}")  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
