"""toolkeeper's state folders, recognised by what they hold, wherever they are.

A state folder holds credentials (the operator token decides approvals) and stores (approvals,
audit). A tool that reads one can approve its own calls, whichever server's folder it is: the
one ``serve`` runs on, or another server's kept in a project folder. So no tool reads or writes
inside a folder that holds any of ``STATE_FILES`` — the marker every state folder gets when it is
made, the token files, the key upstream OAuth tokens are sealed under, the database — and the
file tools check every directory they pass through, on directory fds (``fs.Workspace``).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from pathlib import Path

__all__ = ["RULE", "STATE_FILES", "STATE_MARKER", "enclosing_state_dir", "mark_state_dir",
           "state_file_in", "state_in_names", "state_reason"]

STATE_MARKER = ".toolkeeper-state"
"""The file every state folder gets when it is made."""
STATE_FILES = (STATE_MARKER, "token", "client-token", "upstream-key", "toolkeeper.db")
"""A folder holding a regular file of one of these names is toolkeeper state."""
RULE = "toolkeeper_state"
_MARKER_TEXT = ("This folder holds toolkeeper state (tokens, approvals, audit). No toolkeeper "
                "tool reads or writes it; keep it out of every workspace.\n")


def state_file_in(dirfd: int) -> str | None:
    """The name that makes the directory ``dirfd`` a state folder, or ``None``."""
    for name in STATE_FILES:
        try:
            info = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode):
            return name
    return None


def state_in_names(regular_files: Iterable[str]) -> str | None:
    """The name among a directory's regular files that makes it a state folder, or ``None``."""
    names = set(regular_files)
    return next((name for name in STATE_FILES if name in names), None)


def state_reason(folder: str, found: str) -> str:
    """Why a path in (or at) the state folder ``folder`` is refused, and what to do."""
    where = f"'{folder}'" if folder else "the workspace itself"
    return (f"{where} holds toolkeeper state (it has '{found}': tokens, approvals, audit), "
            f"which no tool reads or writes (rule {RULE}); this cannot be allowed: move that "
            "folder out of the workspace")


def mark_state_dir(folder: Path) -> None:
    """Put the marker in ``folder`` (a state folder being made or used): owner-only, never
    through a symlink; an existing marker is left as it is."""
    try:
        fd = os.open(folder / STATE_MARKER,
                     os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as out:
        out.write(_MARKER_TEXT)


def enclosing_state_dir(path: Path) -> tuple[Path, str] | None:
    """``path`` itself or the nearest of its parents that is a state folder, with the name
    that makes it one; ``None`` when there is none."""
    for folder in [path, *path.parents]:
        try:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.ENOENT, errno.ENOTDIR):
                continue
            raise
        try:
            found = state_file_in(fd)
        finally:
            os.close(fd)
        if found is not None:
            return folder, found
    return None
