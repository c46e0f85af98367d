"""Workspaces the sandbox user can reach (as root, commands run as an unprivileged uid)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolkeeper.sandbox import UNPRIVILEGED_UID


def hand_over(root: Path) -> None:
    """Give the tree to the sandbox user when the tests run as root."""
    if os.geteuid() == 0:
        for path in [root, *root.rglob("*")]:
            try:
                os.chown(path, UNPRIVILEGED_UID, UNPRIVILEGED_UID, follow_symlinks=False)
            except FileNotFoundError:  # a SQLite journal the store removed meanwhile
                continue


@pytest.fixture
def reachable() -> Iterator[Path]:
    """A fresh directory under /tmp that the sandbox user can traverse (pytest's is private)."""
    path = Path(tempfile.mkdtemp(prefix="tk-ws-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def ws(reachable: Path) -> Path:
    """A workspace ``ws`` under ``reachable``, handed over to the sandbox user."""
    root = reachable / "ws"
    root.mkdir()
    hand_over(root)
    return root
