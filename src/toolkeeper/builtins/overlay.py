"""Applying what a sandboxed run wrote: the upper layer of its copy-on-write view of the
workspace (``sandbox.Overlay``), moved into the workspace through directory fds once every
process of the run is gone.

Each entry of the upper layer is judged before it touches the workspace: a path a forbidden-path
rule covers (``.envrc``, ``.git`` at any depth, ``.mcp.json``…) and anything inside a toolkeeper
state folder is refused, and so is a removal of one (an overlay records a removal as a ``0:0``
character device, a "whiteout"; a directory made anew over a removed one is "opaque"). So a
protected path a command creates never exists in the workspace, not even while the command runs;
the answer says what was refused and the rule that refused it. Everything else is applied: a
rename when the upper layer is on the workspace's filesystem, else a copy through a temporary
file renamed into place.

Both trees are hostile here — the command wrote the upper layer and may have planted symlinks —
so every directory is opened with ``openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`` from its
parent's fd, entries are looked at with ``lstat`` and never followed, and removals unlink the
entry itself.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field

from .fs import RESOLVE_BENEATH, RESOLVE_NO_MAGICLINKS, RESOLVE_NO_SYMLINKS, openat2
from .scan import MAX_DEPTH, MAX_DIRS
from .state_dirs import RULE as STATE_RULE
from .state_dirs import state_file_in

__all__ = ["Applied", "Judge", "applied_note", "apply_upper"]

Judge = Callable[[str, bool], str | None]
"""The rule that refuses a change at a workspace-relative path (a directory, or not), said as
the answer shows it (``rule security.forbidden_paths '.envrc'``), or ``None`` to allow it."""
STATE = f"toolkeeper state, rule {STATE_RULE}"
_NO_LINKS = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
OPAQUE = "user.overlay.opaque"


@dataclass
class Applied:
    """What applying a run's writes did not do, and why."""

    refused: list[tuple[str, str]] = field(default_factory=list)
    """(path, rule) of every change refused."""
    skipped: list[str] = field(default_factory=list)
    """Entries a workspace cannot take (sockets, devices)."""
    failed: list[str] = field(default_factory=list)
    """Changes that could not be made (the workspace changed, a disk full)."""
    changed: int = 0


def _open_dir(parent: int, name: str) -> int:
    return openat2(parent, name, _DIR, resolve=_NO_LINKS)


def _lstat(dirfd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except FileNotFoundError:
        return None


_PRIVILEGE = stat.S_ISUID | stat.S_ISGID
"""Mode bits a run's file never brings into the workspace: set-user-ID and set-group-ID. The
sandbox ignores them (no new privileges), but the host would not: a file made set-user-ID in a
shared workspace runs as its owner — the server's user, who holds the state dir — for whoever
runs it."""
SIZE = "the workspace would grow too deep or too large to check before the next run, rule workspace.size"
"""Why a new directory is refused: past ``max_depth`` levels, or past the run's share of the
directories a workspace may hold (``scan.MAX_DIRS``) — applied, it would make every later
command and script of every client refused until someone removed it."""


class _Applier:
    def __init__(self, judge: Judge, same_fs: bool, *, new_dirs: int, max_depth: int) -> None:
        self.judge, self.same_fs = judge, same_fs
        self.new_dirs, self.max_depth = new_dirs, max_depth
        self.done = Applied()

    def directory(self, up: int, ws: int, base: str) -> None:
        """Apply one directory of the upper layer (``up``) to its workspace directory."""
        found = state_file_in(ws)
        if found is not None:
            self.done.refused.append((base or ".", STATE))
            return
        entries = sorted(os.listdir(up))
        if _opaque(up):
            for name in sorted(set(os.listdir(ws)) - set(entries)):
                self.remove(ws, name, _join(base, name))
        for name in entries:
            try:
                self.entry(up, ws, name, _join(base, name))
            except OSError as exc:
                self.done.failed.append(f"{_join(base, name)} ({exc.strerror or exc})")

    def entry(self, up: int, ws: int, name: str, rel: str) -> None:
        info = os.stat(name, dir_fd=up, follow_symlinks=False)
        kind = stat.S_IFMT(info.st_mode)
        if kind == stat.S_IFCHR and info.st_rdev == 0:  # a whiteout: the run removed it
            self.remove(ws, name, rel)
            return
        rule = self.judge(rel, kind == stat.S_IFDIR)
        if rule is not None:
            self.done.refused.append((rel, rule))
            return
        if kind == stat.S_IFDIR:
            self.subdirectory(up, ws, name, rel, info)
        elif kind in (stat.S_IFREG, stat.S_IFLNK, stat.S_IFIFO):
            existing = _lstat(ws, name)
            if existing is not None and stat.S_ISDIR(existing.st_mode) and not self.remove(
                    ws, name, rel):
                return
            self.place(up, ws, name, info)
            self.done.changed += 1
        else:
            self.done.skipped.append(rel)

    def subdirectory(self, up: int, ws: int, name: str, rel: str,
                     info: os.stat_result) -> None:
        existing = _lstat(ws, name)
        if existing is not None and not stat.S_ISDIR(existing.st_mode):
            if not self.remove(ws, name, rel):
                return
            existing = None
        if existing is None:
            if self.new_dirs <= 0 or rel.count("/") + 1 >= self.max_depth:
                self.done.refused.append((rel, SIZE))
                return
            self.new_dirs -= 1
            os.mkdir(name, stat.S_IMODE(info.st_mode) & ~_PRIVILEGE, dir_fd=ws)
            if os.geteuid() == 0:  # the sandbox's uid made it, and writes in it next time
                os.chown(name, info.st_uid, info.st_gid, dir_fd=ws, follow_symlinks=False)
            self.done.changed += 1
        up_child, ws_child = _open_dir(up, name), _open_dir(ws, name)
        try:
            wanted = stat.S_IMODE(info.st_mode) & ~_PRIVILEGE
            if existing is not None and stat.S_IMODE(existing.st_mode) != wanted:
                os.chmod(ws_child, wanted)
            self.directory(up_child, ws_child, rel)
        finally:
            os.close(up_child)
            os.close(ws_child)

    def place(self, up: int, ws: int, name: str, info: os.stat_result) -> None:
        """Put the upper layer's ``name`` in place of the workspace's, atomically, without
        its set-user-ID and set-group-ID bits (``_PRIVILEGE``)."""
        if self.same_fs:
            if stat.S_ISREG(info.st_mode) and info.st_mode & _PRIVILEGE:
                entry = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=up)
                try:
                    os.fchmod(entry, stat.S_IMODE(info.st_mode) & ~_PRIVILEGE)
                finally:
                    os.close(entry)
            os.rename(name, name, src_dir_fd=up, dst_dir_fd=ws)
            return
        temp = f".{name[:200]}.{secrets.token_hex(6)}.tmp"
        try:
            _copy(up, ws, name, temp, info)
            os.rename(temp, name, src_dir_fd=ws, dst_dir_fd=ws)
        except BaseException:
            with suppress(OSError):
                os.unlink(temp, dir_fd=ws)
            raise

    def remove(self, ws: int, name: str, rel: str) -> bool:
        """Remove the workspace's ``name`` as the run did, keeping (and reporting) what is
        protected inside it; whether it is gone."""
        existing = _lstat(ws, name)
        if existing is None:
            return True
        rule = self.judge(rel, stat.S_ISDIR(existing.st_mode))
        if rule is not None:
            self.done.refused.append((rel, rule))
            return False
        if not stat.S_ISDIR(existing.st_mode):
            os.unlink(name, dir_fd=ws)
            self.done.changed += 1
            return True
        child = _open_dir(ws, name)
        try:
            if state_file_in(child) is not None:
                self.done.refused.append((rel, STATE))
                return False
            kept = [inner for inner in sorted(os.listdir(child))
                    if not self.remove(child, inner, _join(rel, inner))]
        finally:
            os.close(child)
        if kept:
            return False
        os.rmdir(name, dir_fd=ws)
        self.done.changed += 1
        return True


def _join(base: str, name: str) -> str:
    return f"{base}/{name}" if base else name


def _opaque(dirfd: int) -> bool:
    try:
        return os.getxattr(dirfd, OPAQUE) == b"y"
    except OSError:
        return False


def _copy(up: int, ws: int, name: str, temp: str, info: os.stat_result) -> None:
    """``name`` of the upper layer as ``temp`` in the workspace: a file's bytes, a symlink's
    target or a FIFO, with the mode (and, for root, the owner) it had, less the set-user-ID
    and set-group-ID bits."""
    mode = stat.S_IMODE(info.st_mode) & ~_PRIVILEGE
    if stat.S_ISLNK(info.st_mode):
        os.symlink(os.readlink(name, dir_fd=up), temp, dir_fd=ws)
        return
    if stat.S_ISFIFO(info.st_mode):
        os.mkfifo(temp, mode, dir_fd=ws)
        return
    source = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=up)
    try:
        target = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, mode, dir_fd=ws)
        try:
            while os.copy_file_range(source, target, 1 << 24):
                pass
            if os.geteuid() == 0:
                os.fchown(target, info.st_uid, info.st_gid)
            os.fchmod(target, mode)
            os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))
        finally:
            os.close(target)
    finally:
        os.close(source)


def apply_upper(upper_fd: int, workspace_fd: int, judge: Judge, *,
                same_fs: bool | None = None, new_dirs: int = MAX_DIRS,
                max_depth: int = MAX_DEPTH) -> Applied:
    """Apply the upper layer below ``upper_fd`` to the workspace below ``workspace_fd``, each
    change judged by ``judge`` (and none inside a toolkeeper state folder). Call it only once
    every process of the run is gone. ``same_fs``: whether entries can be renamed into place
    (by default: whether both are on one filesystem); else they are copied. At most
    ``new_dirs`` directories are made, none ``max_depth`` levels deep or deeper (``SIZE``)."""
    if same_fs is None:
        same_fs = os.fstat(upper_fd).st_dev == os.fstat(workspace_fd).st_dev
    applier = _Applier(judge, same_fs, new_dirs=new_dirs, max_depth=max_depth)
    try:
        applier.directory(upper_fd, workspace_fd, "")
    except OSError as exc:
        applier.done.failed.append(f". ({exc.strerror or exc})")
    return applier.done


def applied_note(who: str, applied: Applied) -> str:
    """The lines a tool's answer carries about what of a run's writes did not reach the
    workspace ("" when everything did)."""
    lines = []
    if applied.refused:
        shown = ", ".join(f"{rel} ({rule})" for rel, rule in applied.refused[:20])
        more = f" and {len(applied.refused) - 20} more" if len(applied.refused) > 20 else ""
        lines.append(f"[refused: {who} changed protected paths, and these changes were not "
                     f"applied to the workspace: {shown}{more}. A forbidden path is allowed by "
                     "removing its rule from security.forbidden_paths; toolkeeper state never]")
    if applied.skipped:
        lines.append(f"[not applied: {', '.join(applied.skipped[:20])} (sockets and devices "
                     "stay in the sandbox)]")
    if applied.failed:
        lines.append(f"[not applied, the workspace changed or is full: "
                     f"{', '.join(applied.failed[:20])}]")
    return "\n".join(lines)
