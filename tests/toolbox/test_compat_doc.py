"""docs/compat.md's example runs as written."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "compat.md"


def test_every_python_block_of_the_compat_page_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), {"__name__": "compat_doc"})


def test_every_toolkeeper_name_the_compat_page_gives_is_there() -> None:
    text = DOC.read_text(encoding="utf-8")
    dotted = {p for p in re.findall(r"`(toolkeeper(?:\.\w+)+)`", text)
              if p != "toolkeeper.toml"}  # the config file, not a module
    imported = {f"toolkeeper.{name.strip()}" for names in re.findall(
        r"`from toolkeeper import ([\w, ]+)`", text) for name in names.split(",")}
    assert len(dotted) >= 3 and len(imported) >= 5
    for path in sorted(dotted | imported):
        module, _, name = path.rpartition(".")
        try:
            found = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            found = importlib.import_module(path)  # a module named by the page
        assert found is not None, path
