"""Every ``toolkeeper.toml`` the docs show starts a real ``toolkeeper serve``.

A ```` ```toml ```` block of README.md or a page under docs/ is a complete configuration unless
the line before it says otherwise: ``<!-- toml: not-a-config WHY -->`` (a locale's description
file is TOML too). Each configuration is written to ``toolkeeper.toml`` in a fresh directory
holding the directories it names (``[security] workspace``, ``[skills] dir``), with every
``${NAME}`` it reads from the environment set, and served with the example tools the pages'
configs name (``get_forecast``, ``broadcast_alert``) on a free port, until the server prints
its URL; then it is stopped, and must stop cleanly. A directory named by an absolute path (a
deployment's ``/var/lib/…``) is replaced by one in the temporary directory through the flag
that wins over it (``--workspace``, ``--artifacts``): the test writes nothing outside it. A
configuration that names an upstream MCP server is served as written: its upstreams attach in
the background (a temporary ``HOME`` and private homes of sandboxed upstreams, each with an
offline npm, keep ``npx`` from downloading anything).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ..processes import readable

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "weather.py"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(r"^(?:<!-- toml: (?P<marker>[^\n]*?) -->\n)?```toml\n(?P<code>.*?)^```",
                   re.S | re.M)
NOT_A_CONFIG = "not-a-config "
DIRECTORIES = {("security", "workspace"): "--workspace", ("skills", "dir"): None,
               ("server", "artifact_dir"): "--artifacts"}
"""The settings that name a directory, and the flag that wins over each (an absolute path)."""


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    code: str
    marker: str | None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def toml_blocks() -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            line = text.count("\n", 0, match.start("code")) + 1
            found.append(Block(page, line, match.group("code"), match.group("marker")))
    return found


BLOCKS = toml_blocks()
CONFIGS = [b for b in BLOCKS if b.marker is None]


def test_every_toml_block_is_a_config_or_says_why_not() -> None:
    for block in BLOCKS:
        tomllib.loads(block.code)  # whatever it is, it is TOML as written
        if block.marker is not None:
            assert block.marker.startswith(NOT_A_CONFIG) and len(block.marker) > 24, (
                f"{block.where}: a TOML block that is not a toolkeeper.toml says what it is: "
                f"<!-- toml: {NOT_A_CONFIG}WHY -->")
    assert len(CONFIGS) >= 6, [b.where for b in CONFIGS]


def _environment(block: Block, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLKEEPER_", "XDG_"))}
    env.update({name: f"doc-example-{name.lower()}"
                for name in re.findall(r"\$\{(\w+)\}", block.code)})
    env.update(HOME=str(home), TOOLKEEPER_TOKEN="docs-config-operator-token-0123456789",
               TOOLKEEPER_CACHE_DIR=str(home.parent / "cache"))
    return env


def _directories(config: dict[str, Any], folder: Path, elsewhere: Path) -> list[str]:
    """Make the directories the config names (relative to its own folder, as it reads them);
    the flags that put an absolute one in ``elsewhere`` instead (beside the folder, which is
    the default workspace)."""
    flags: list[str] = []
    for (section, key), flag in DIRECTORIES.items():
        value = config.get(section, {}).get(key)
        if not isinstance(value, str):
            continue
        if Path(value).is_absolute():
            assert flag is not None, f"{section}.{key} = {value!r}: make it relative"
            (elsewhere / f"{section}-{key}").mkdir(parents=True)
            flags += [flag, str(elsewhere / f"{section}-{key}")]
            continue
        (folder / value).mkdir(parents=True, exist_ok=True)
    return flags


@pytest.mark.parametrize("block", CONFIGS, ids=lambda b: b.where)
def test_every_documented_config_starts_a_real_server(block: Block, tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "toolkeeper.toml").write_text(block.code)
    flags = _directories(tomllib.loads(block.code), folder, tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".npmrc").write_text("offline=true\n")  # an example's npx must not download
    for server in tomllib.loads(block.code).get("mcp", {}).get("servers", []):
        private = tmp_path / "cache" / "mcp" / server["name"]  # a sandboxed upstream's home
        private.mkdir(parents=True)
        (private / ".npmrc").write_text("offline=true\n")
    command = [sys.executable, "-m", "toolkeeper.cli", "serve", str(EXAMPLE), "--config",
               "toolkeeper.toml", "--port", "0", "--state-dir", str(tmp_path / "state"), *flags]
    proc = subprocess.Popen(command, cwd=folder, env=_environment(block, home), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        ready = readable([proc.stdout], 90)
        line = proc.stdout.readline() if ready else ""
        if not line.startswith("toolkeeper serving on "):
            proc.kill()
            pytest.fail(f"{block.where}: serve did not start with this config: {line!r}\n"
                        f"{proc.communicate(timeout=30)[1]}", pytrace=False)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGTERM, err
    assert "Traceback" not in err, err
