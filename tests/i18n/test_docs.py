"""docs/i18n.md runs as written: its Python blocks in order, its TOML blocks parse (and the
config one loads as a toolkeeper.toml)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from toolkeeper.config import load_config

PAGE = Path(__file__).resolve().parents[2] / "docs" / "i18n.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def _blocks(language: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(PAGE.read_text(encoding="utf-8"))
            if lang == language]


def test_the_python_blocks_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("TOOLKEEPER_LOCALE", "LANG", "LC_ALL"):
        monkeypatch.delenv(name, raising=False)
    blocks = _blocks("python")
    assert len(blocks) == 2
    for index, block in enumerate(blocks):
        exec(compile(block, f"{PAGE.name}[python {index}]", "exec"), {"__name__": "docs"})


def test_the_toml_blocks_parse_and_the_config_loads(tmp_path: Path) -> None:
    blocks = _blocks("toml")
    assert len(blocks) == 2
    for block in blocks:
        tomllib.loads(block)
    config = next(b for b in blocks if b.startswith("# toolkeeper.toml"))
    (tmp_path / "toolkeeper.toml").write_text(config, encoding="utf-8")
    assert load_config(tmp_path / "toolkeeper.toml").locale == "de"
