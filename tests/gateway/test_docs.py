"""docs/mcp.md's gateway example runs as written (against the SDK-only upstream as its
``notes_server.py``) and prints what the page shows; the ``[[mcp.servers]]`` blocks of
docs/mcp.md and docs/config.md load with the relay keys they show."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from toolkeeper.config import load_config

DOCS = Path(__file__).resolve().parents[2] / "docs"
DOC = DOCS / "mcp.md"
UPSTREAM = Path(__file__).with_name("upstream_server.py")


def _section() -> str:
    return DOC.read_text().split("## The gateway", 1)[1].split("\n## ", 1)[0]


def test_the_gateway_example_runs_as_written_and_prints_what_the_page_shows(
        tmp_path: Path) -> None:
    blocks = re.findall(r"```(\w*)\n(.*?)```", _section(), flags=re.S)
    code = next(body for lang, body in blocks if lang == "python")
    shown = next(body for lang, body in blocks if lang == "")
    shutil.copy(UPSTREAM, tmp_path / "notes_server.py")
    (tmp_path / "bin").mkdir()
    python3 = tmp_path / "bin" / "python3"  # the python with the SDK, as the example names it
    python3.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python3.chmod(0o755)
    (tmp_path / "example.py").write_text(code)
    run = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120, check=False,
                         env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr
    assert run.stdout == shown


def test_the_gateway_config_block_loads_with_the_relay_keys(tmp_path: Path) -> None:
    toml = next(body for lang, body in re.findall(r"```(\w*)\n(.*?)```", _section(), flags=re.S)
                if lang == "toml")
    (tmp_path / "toolkeeper.toml").write_text(toml)
    files, tracker = load_config(tmp_path / "toolkeeper.toml").mcp.servers
    assert (tracker.sampling, tracker.elicitation, tracker.resources, tracker.prompts,
            tracker.logs) == (True, False, True, True, True)
    # off unless configured; resources, prompts and logs on
    assert (files.sampling, files.elicitation, files.resources, files.prompts, files.logs) == (
        False, False, True, True, True)


def test_the_config_page_block_loads_with_sampling_and_elicitation_off(tmp_path: Path) -> None:
    section = (DOCS / "config.md").read_text().split("## Upstream MCP servers", 1)[1]
    (toml,) = re.findall(r"```toml\n(.*?)```", section.split("\n## ", 1)[0], flags=re.S)
    (tmp_path / "toolkeeper.toml").write_text(toml)
    config = load_config(tmp_path / "toolkeeper.toml")
    (notes,) = config.mcp.servers
    assert config.mcp.enabled and notes.name == "notes"
    assert (notes.resources, notes.prompts, notes.logs, notes.sampling, notes.elicitation) == (
        True, True, True, False, False)
