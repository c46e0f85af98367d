"""The README's first command: ``make run ARGS=...`` prints the declarations even when the lint
finds warnings (the lint's exit status must not stop the job)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_make_run_prints_the_declarations_when_the_lint_warns(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.fail("make is not installed (the README's commands need it)")
    module = tmp_path / "warned.py"
    module.write_text('from toolkeeper import tool\n\n\n@tool\ndef tally(counts: dict[str, int]) -> int:'
                      '\n    """Add up counts per name."""\n    return sum(counts.values())\n')
    venv = Path(sys.prefix)
    result = subprocess.run(
        ["make", "-s", "-C", str(ROOT), "-o", f"{venv}/.core", "run", f"VENV={venv}",
         f"ARGS={module}"], capture_output=True, text=True, check=False, timeout=120)
    assert " 1 warning(s)" in result.stdout  # the lint ran and warned (exit status 1)...
    declaration = json.loads(result.stdout[result.stdout.index("\n{") + 1:])
    assert declaration["function"]["name"] == "tally"  # ...and the job went on
    assert result.returncode == 0, result.stderr
