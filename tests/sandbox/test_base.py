"""What every backend shares: a shared or hidden path is refused the same way by each, before
anything is started or any descriptor opened; hiding entries below a mount."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolkeeper.errors import UsageError
from toolkeeper.sandbox import (
    BubblewrapSandbox,
    HiddenPath,
    LandlockSandbox,
    RunOptions,
    Sandbox,
    SharedPath,
    UnconfinedSandbox,
)

from ..workspaces import hand_over


@pytest.mark.parametrize("backend", [BubblewrapSandbox, LandlockSandbox])
@pytest.mark.parametrize("bad", ["relative/dir", "/", "/no/such/directory"])
def test_a_bad_shared_path_is_refused_before_anything_starts(
        backend: type, bad: str, tmp_path: Path) -> None:
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(UsageError, match="a shared path must be an existing absolute directory"):
        backend().run(tmp_path, ["/bin/true"], RunOptions(shared=(SharedPath(Path(bad)),)))
    assert len(os.listdir("/proc/self/fd")) == before  # no descriptor left open


@pytest.mark.parametrize("backend", [BubblewrapSandbox, LandlockSandbox, UnconfinedSandbox])
@pytest.mark.parametrize("bad", ["", ".", "..", "a/../b", "/etc/passwd", "a//b"])
def test_a_hidden_path_that_is_not_plainly_below_its_mount_is_refused(
        backend: type, bad: str, tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        backend().run(tmp_path, ["/bin/true"], RunOptions(hidden=(HiddenPath(bad),)))
    with pytest.raises(UsageError):
        backend().run(tmp_path, ["/bin/true"], RunOptions(shared=(
            SharedPath(tmp_path, hidden=(HiddenPath(bad),)),)))


@pytest.mark.parametrize("backend", [LandlockSandbox, UnconfinedSandbox])
def test_a_backend_that_cannot_hide_refuses_rather_than_shows(backend: type[Sandbox],
                                                              tmp_path: Path) -> None:
    (tmp_path / ".envrc").write_text("x")
    assert backend.protects_paths is False
    with pytest.raises(UsageError, match="hid"):
        backend().run(tmp_path, ["/bin/true"], RunOptions(hidden=(HiddenPath(".envrc"),)))


def test_bubblewrap_never_binds_a_hidden_paths_directory_through_a_symlink(
        reachable: Path) -> None:
    """A directory swapped for a symlink after the caller's check fails the run: it is
    opened one name at a time without following any link, so nothing outside comes in."""
    outside = reachable / "outside"
    outside.mkdir()
    (outside / "config").write_text("OUTSIDE")
    ws = reachable / "ws"
    ws.mkdir()
    (ws / ".git").symlink_to(outside)
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(OSError):
        BubblewrapSandbox().run(ws, ["/bin/cat", ".git/config"],
                                RunOptions(hidden=(HiddenPath(".git/config"),)))
    assert len(os.listdir("/proc/self/fd")) == before


def test_bubblewrap_hides_files_and_directories_of_the_workspace_and_of_a_shared_path(
        reachable: Path) -> None:
    ws, shared = reachable / "ws", reachable / "shared"
    for root in (ws, shared):
        (root / "d" / "sub").mkdir(parents=True)
        (root / "d" / "sub" / "f").write_text("SECRET")
        (root / "d" / "file").write_text("SECRET")
        (root / "d" / "open").write_text("open")
    hand_over(reachable)
    hidden = (HiddenPath("d/sub", directory=True), HiddenPath("d/file"))
    script = " ; ".join(f"cat {root}/d/sub/f {root}/d/file {root}/d/open; "
                        f"rm -f {root}/d/file; mv {root}/d {root}/moved"
                        for root in ("/workspace", str(shared)))
    result = BubblewrapSandbox().run(ws, ["/bin/sh", "-c", script], RunOptions(
        hidden=hidden, shared=(SharedPath(shared, writable=True, hidden=hidden),)))
    assert "SECRET" not in result.stdout and result.stdout == "openopen"
    assert result.stderr.count("Device or resource busy") == 4, result.stderr
    for root in (ws, shared):
        assert (root / "d" / "file").read_text() == "SECRET"
