"""Build the tool-search evaluation set from the Berkeley Function Calling Leaderboard data.

Source: the ``bfcl-eval`` package on PyPI (Apache-2.0), which ships the BFCL question files.
Every function definition in the simple, live-simple, multiple and live-multiple categories goes
into the tool pool (deduplicated by name and description); every question of those categories
whose ground truth names a function becomes a query, labelled with the pool entries of that name.

    python benchmarks/search_eval/build.py            # downloads the wheel with pip
    python benchmarks/search_eval/build.py WHEEL.whl  # or reads a wheel you have
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SETS = ("simple_python", "live_simple", "multiple", "live_multiple")
PREFIX = "bfcl_eval/data/"


def _wheel(argv: list[str]) -> Path:
    if argv:
        return Path(argv[0])
    tmp = Path(tempfile.mkdtemp())
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(tmp),
                    "bfcl-eval==2026.3.23"], check=True)
    return next(tmp.glob("bfcl_eval-*.whl"))


def _lines(archive: zipfile.ZipFile, name: str) -> list[dict[str, Any]]:
    text = archive.read(PREFIX + name).decode("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _question(entry: dict[str, Any]) -> str:
    turn = entry["question"][0]
    users = [m["content"] for m in turn if m.get("role") == "user"]
    return str(users[-1]).strip() if users else ""


def _answer_name(answer: dict[str, Any]) -> str | None:
    truth = answer.get("ground_truth") or []
    return next(iter(truth[0]), None) if truth and isinstance(truth[0], dict) else None


def build(wheel: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    pool: dict[tuple[str, str], dict[str, Any]] = {}
    queries: list[dict[str, Any]] = []
    with zipfile.ZipFile(wheel) as archive:
        for name in SETS:
            entries = _lines(archive, f"BFCL_v4_{name}.json")
            answers = {a["id"]: a for a in _lines(archive, f"possible_answer/BFCL_v4_{name}.json")}
            for entry in entries:
                for function in entry["function"]:
                    key = (function["name"], function.get("description", ""))
                    pool.setdefault(key, {"id": f"t{len(pool)}", **function})
                wanted = _answer_name(answers.get(entry["id"], {}))
                query = _question(entry)
                if wanted and query:
                    queries.append({"id": entry["id"], "query": query, "tool": wanted})
    tools = list(pool.values())
    by_name: dict[str, list[str]] = {}
    for tool in tools:
        by_name.setdefault(tool["name"], []).append(tool["id"])
    labelled = [{**q, "relevant": by_name[q["tool"]]} for q in queries if q["tool"] in by_name]
    return tools, labelled


def main() -> None:
    tools, queries = build(_wheel(sys.argv[1:]))
    with (HERE / "tools.jsonl").open("w") as out:
        for tool in tools:
            out.write(json.dumps(tool, ensure_ascii=False) + "\n")
    with (HERE / "queries.jsonl").open("w") as out:
        for query in queries:
            out.write(json.dumps(query, ensure_ascii=False) + "\n")
    print(f"{len(tools)} tools, {len(queries)} queries")


if __name__ == "__main__":
    main()
