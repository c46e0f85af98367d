"""The real ``toolkeeper`` command in a subprocess, as a person runs it in a terminal of a given
width."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def toolkeeper(*args: str, columns: int = 80, cwd: Path = ROOT,
               timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``toolkeeper ARGS`` with ``COLUMNS`` set (rich lays its output out to it)."""
    env = {**os.environ, "COLUMNS": str(columns)}
    env.pop("LINES", None)
    return subprocess.run([sys.executable, "-m", "toolkeeper.cli", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=timeout, check=False)
