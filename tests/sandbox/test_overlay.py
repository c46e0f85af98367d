"""A workspace's copy-on-write view: the command reads the directory as it is, writes into a
private upper layer, and runs as the same user as without a view; a backend without one refuses
the option."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolkeeper import UsageError
from toolkeeper.sandbox import (
    BubblewrapSandbox,
    LandlockSandbox,
    RunOptions,
    new_overlay,
    probe_overlay,
    remove_overlay,
)
from toolkeeper.sandbox.overlay import sandbox_ids

from ..workspaces import hand_over


def test_this_host_can_make_a_view() -> None:
    assert probe_overlay() is None


@pytest.mark.parametrize("name", ["ws", "a dir, with: odd characters"])
def test_writes_land_in_the_upper_layer_and_the_directory_is_unchanged(reachable: Path,
                                                                      name: str) -> None:
    ws = reachable / name
    ws.mkdir()
    (ws / "a.txt").write_text("a\n")
    hand_over(ws)
    overlay = new_overlay()
    try:
        result = BubblewrapSandbox().run(ws, ["/bin/sh", "-c", "cat a.txt; echo b > b.txt; "
                                              "echo more >> a.txt; id -u; id -g"],
                                         RunOptions(overlay=overlay))
        assert result.exit_code == 0, result.stderr
        assert result.stdout.split() == ["a", *map(str, sandbox_ids())]
        assert sorted(os.listdir(ws)) == ["a.txt"] and (ws / "a.txt").read_text() == "a\n"
        assert (overlay.upper / "b.txt").read_text() == "b\n"
        assert (overlay.upper / "a.txt").read_text() == "a\nmore\n"
    finally:
        remove_overlay(overlay)
    assert not overlay.root.exists()


def test_a_backend_without_views_refuses_one(tmp_path: Path) -> None:
    overlay = new_overlay()
    try:
        with pytest.raises(UsageError, match="copy-on-write"):
            LandlockSandbox().run(tmp_path, ["/bin/true"], RunOptions(overlay=overlay))
    finally:
        remove_overlay(overlay)
