"""The Landlock fallback's launcher finds its children with or without /proc's children file."""

from __future__ import annotations

import builtins
import subprocess
from typing import Any

import pytest

from toolkeeper.sandbox import _reaper


@pytest.mark.parametrize("children_file", [True, False])
def test_children_are_found(children_file: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    real_open = builtins.open

    def without_children_file(path: Any, *args: Any, **kwargs: Any) -> Any:
        if str(path).endswith("/children"):
            raise FileNotFoundError(path)
        return real_open(path, *args, **kwargs)

    proc = subprocess.Popen(["sleep", "30"])
    try:
        if not children_file:
            monkeypatch.setattr(builtins, "open", without_children_file)
        assert proc.pid in _reaper._children()
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_bad_usage_is_refused_with_a_message() -> None:
    assert _reaper.main(["-1", "3"]) == 2
    assert _reaper.main(["-1", "3", "-1", "--"]) == 2
