"""File access that never trusts path strings: every open is relative to the workspace's
directory fd through ``openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)``.

Writes also refuse symlinks anywhere in the path (``RESOLVE_NO_SYMLINKS``) and go through an
``O_EXCL`` temporary file in the opened parent directory, renamed into place with ``renameat``.
Non-regular files (FIFOs, devices, sockets) and hard-linked files are refused, and so is
every path through a toolkeeper state folder (``state_dirs``): each directory on the way is
checked, on its fd.
"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
import shutil
import stat
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ..errors import PolicyViolationError, ToolRaisedError
from .state_dirs import RULE as STATE_RULE
from .state_dirs import state_file_in, state_reason

__all__ = ["Workspace", "check_not_state", "lstat_beneath", "open_readable", "openat2",
           "remove_beneath", "visible"]

SYS_OPENAT2 = 437
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
_NO_LINKS = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS
PATH_MAX = 4096
"""Bytes a path may take (Linux's ``PATH_MAX``): a longer one names nothing the kernel would
open, and is refused before any rule is matched against it."""
_libc = ctypes.CDLL(None, use_errno=True)


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64),
                ("resolve", ctypes.c_uint64)]


def openat2(dirfd: int, path: str, flags: int, *, mode: int = 0,
            resolve: int = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) -> int:
    """The ``openat2`` system call (Linux ≥ 5.6); raises ``OSError`` with the kernel's errno."""
    how = _OpenHow(flags | os.O_CLOEXEC, mode, resolve)
    fd = _libc.syscall(SYS_OPENAT2, dirfd, os.fsencode(path), ctypes.byref(how),
                       ctypes.sizeof(how))
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), path)
    return int(fd)


_REASONS = {
    errno.EXDEV: "it resolves outside the workspace",
    errno.ELOOP: "it goes through a symbolic link",
    errno.ENOENT: "it does not exist",
    errno.ENOTDIR: "a part of it is not a directory",
    errno.EACCES: "permission denied",
    errno.EISDIR: "it is a directory",
}


def _invisible(char: str) -> bool:
    # Cc: C0/C1 controls and DEL (terminal escapes, BEL); Cf: bidi overrides and isolates,
    # zero-width characters — a name that reads differently from what it is; Zl, Zp: the line
    # and paragraph separators (U+2028, U+2029), which break a line where none shows; Cs: a
    # lone surrogate, which a terminal cannot even be sent.
    return unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp", "Cs")


def visible(text: str) -> str:
    """``text`` with control, bidi, zero-width and line-separator characters written as
    escapes (``\\x1b``, ``\\u202e``, ``\\u2028``): safe to echo to a terminal, a log or a
    model."""
    if not any(_invisible(c) for c in text):
        return text
    return "".join(c.encode("unicode_escape").decode("ascii") if _invisible(c) else c
                   for c in text)


def _refuse(path: str, reason: str, tool: str, rule: str = "workspace") -> PolicyViolationError:
    return PolicyViolationError(f"'{visible(path)}' is refused: {reason}", tool_name=tool,
                                details={"rule": rule})


def open_readable(dirfd: int, rel: str, tool: str) -> int:
    """A read-only fd of ``rel`` below ``dirfd``: never outside it (RESOLVE_BENEATH), not a
    symlink itself, not through a magic link, a regular file (a FIFO would hang, a device
    would never end) with a single link (a hard link brings in a file from outside)."""
    try:
        fd = openat2(dirfd, rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise _refuse(rel, _REASONS.get(exc.errno or 0, exc.strerror or str(exc)), tool) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _refuse(rel, "it is not a regular file", tool)
        if info.st_nlink > 1:
            raise _refuse(rel, "it is hard-linked to another path", tool)
    except BaseException:
        os.close(fd)
        raise
    return fd


class Workspace:
    """A directory tools may use, opened once; paths are checked and opened relative to it."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        self.fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def close(self) -> None:
        os.close(self.fd)

    def relative(self, path: str, tool: str) -> str:
        """A normalized workspace-relative path (``.`` for the root).

        Refuses NUL bytes and absolute paths outside the workspace. ``..`` is left for the kernel
        to judge (RESOLVE_BENEATH refuses escaping it).
        """
        if len(path) > PATH_MAX or len(path.encode("utf-8", "surrogatepass")) > PATH_MAX:
            raise _refuse(f"{path[:60]}…", f"it is longer than the {PATH_MAX} bytes a path may "
                          "take; name a shorter one", tool)
        if "\x00" in path:
            raise _refuse(path, "it contains a NUL byte", tool)
        if any(_invisible(c) for c in path):
            raise _refuse(path, "it contains control, bidi or zero-width characters; use a "
                          "plain name", tool, rule="workspace.names")
        if os.path.isabs(path):
            root = str(self.root)
            if path != root and not path.startswith(root + os.sep):
                raise _refuse(path, f"it is outside the workspace {root}", tool)
            path = path[len(root):].lstrip(os.sep) or "."
        parts = [p for p in path.split("/") if p not in ("", ".")]
        return "/".join(parts) or "."

    def open_file(self, rel: str, tool: str) -> int:
        """A read-only fd of a regular, single-linked file inside the workspace."""
        return open_readable(self.fd, rel, tool)

    def real_relative(self, fd: int) -> str:
        """Where an opened fd really is, relative to the workspace."""
        target = os.readlink(f"/proc/self/fd/{fd}")
        root = str(self.root)
        return target[len(root):].lstrip("/") or "." if target.startswith(root) else target

    def check_location(self, fd: int, real: str, rel: str, tool: str) -> None:
        """Refuse the opened file or directory ``fd`` (asked for as ``rel``) unless ``real`` —
        where it really is — is reached from the workspace through real directories, none of
        them a toolkeeper state folder, and names this very entry (same device and inode).

        Raises:
            PolicyViolationError: a directory on the way is a state folder, or the entry is
                not where ``real`` says (the workspace changed while it was opened).
        """
        changed = _refuse(rel, "the workspace changed while it was opened; try again", tool)
        if real.startswith("/"):
            raise changed
        folder, _, name = real.rpartition("/")
        try:
            dirfd = self.checked_dir(folder if real != "." else "", rel, tool)
        except OSError:
            raise changed from None
        try:
            if real == ".":
                return
            here, opened = os.stat(name, dir_fd=dirfd, follow_symlinks=False), os.fstat(fd)
        except OSError:
            raise changed from None
        finally:
            os.close(dirfd)
        if (here.st_dev, here.st_ino) != (opened.st_dev, opened.st_ino):
            raise changed

    def checked_dir(self, folder: str, rel: str, tool: str) -> int:
        """A directory fd of ``folder`` (``""``: the root) reached through no symlink, every
        directory on the way — the root and ``folder`` included — checked not to be a
        toolkeeper state folder (``rel`` is what the refusal names).

        Raises:
            PolicyViolationError: a directory on the way is a state folder or a symlink.
        """
        dirfd = _open_parent(self.fd, [])
        try:
            check_not_state(dirfd, "", rel, tool)
            walked: list[str] = []
            for part in [p for p in folder.split("/") if p]:
                step = _openat_dir(dirfd, part, rel, tool)
                os.close(dirfd)
                dirfd = step
                walked.append(part)
                check_not_state(dirfd, "/".join(walked), rel, tool)
        except BaseException:
            os.close(dirfd)
            raise
        return dirfd

    @staticmethod
    def read_fd(fd: int, max_bytes: int) -> tuple[bytes, int]:
        """Up to ``max_bytes`` of an open file and its full size."""
        size = os.fstat(fd).st_size
        chunks, remaining = [], max_bytes
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks), size

    @contextmanager
    def parent_dir(self, rel: str, tool: str, *, create: bool) -> Iterator[tuple[int, str]]:
        """(fd of the parent directory, file name), through no symlink at all."""
        fd, name = self._walk_parent(rel, tool, create=create)
        assert fd is not None
        try:
            yield fd, name
        finally:
            os.close(fd)

    def _walk_parent(self, rel: str, tool: str, *, create: bool, probe: bool = False
                     ) -> tuple[int | None, str]:
        """The parent directory's fd (the caller closes it) and the file name, every directory
        on the way checked; ``probe``: stop at the first directory that does not exist yet
        (``None``), creating and changing nothing."""
        parent, _, name = rel.rpartition("/")
        if not name or name in ("..", "."):
            raise _refuse(rel, "it does not name a file", tool)
        fd = os.dup(self.fd)
        try:
            check_not_state(fd, "", rel, tool)
            walked: list[str] = []
            for part in [p for p in parent.split("/") if p]:
                if part == "..":
                    raise _refuse(rel, "it leaves its directory with '..'", tool)
                if create:
                    with suppress(FileExistsError):
                        os.mkdir(part, 0o755, dir_fd=fd)
                elif probe and _missing(fd, part):
                    os.close(fd)
                    return None, name
                next_fd = _openat_dir(fd, part, rel, tool)
                os.close(fd)
                fd = next_fd
                walked.append(part)
                check_not_state(fd, "/".join(walked), rel, tool)
        except BaseException:
            os.close(fd)
            raise
        return fd, name

    def check_write(self, rel: str, tool: str) -> None:
        """Refuse a write of ``rel`` that ``write_atomic`` would refuse as the workspace is
        now, changing nothing: a symlink or a toolkeeper state folder on the way, or an
        existing entry that is not a regular, single-linked file."""
        dirfd, name = self._walk_parent(rel, tool, create=False, probe=True)
        if dirfd is None:
            return
        try:
            _check_target(dirfd, name, rel, tool)
        finally:
            os.close(dirfd)

    def write_atomic(self, rel: str, data: bytes, tool: str, *, create_dirs: bool = True) -> None:
        """Replace or create a regular file atomically (temp file + renameat)."""
        with self.parent_dir(rel, tool, create=create_dirs) as (dirfd, name):
            _check_target(dirfd, name, rel, tool)
            temp = f".{name}.{secrets.token_hex(6)}.tmp"
            try:
                _write_then_rename(dirfd, temp, name, data)
            except OSError as exc:  # the directory changed under us (removed, renamed, full)
                raise ToolRaisedError(
                    f"writing '{visible(rel)}' failed: {exc.strerror or exc}; the workspace "
                    "changed while writing — check the path and try again", tool_name=tool
                ) from exc


def _missing(dirfd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except FileNotFoundError:
        return True
    return False


def _check_target(dirfd: int, name: str, rel: str, tool: str) -> None:
    """Refuse replacing an existing entry that is not a regular, single-linked file."""
    try:
        existing = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(existing.st_mode):
        raise _refuse(rel, "it exists and is not a regular file", tool)
    if existing.st_nlink > 1:
        raise _refuse(rel, "it is hard-linked to another path", tool)


def check_not_state(dirfd: int, where: str, rel: str, tool: str) -> None:
    """Refuse ``rel`` when the directory ``dirfd`` (at ``where`` in the workspace, ``""`` for
    the root) is a toolkeeper state folder."""
    found = state_file_in(dirfd)
    if found is not None:
        raise _refuse(rel, state_reason(visible(where), found), tool, rule=STATE_RULE)


def _write_then_rename(dirfd: int, temp: str, name: str, data: bytes) -> None:
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o644, dir_fd=dirfd)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.rename(temp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(temp, dir_fd=dirfd)
        raise


def _openat_dir(dirfd: int, part: str, rel: str, tool: str) -> int:
    try:
        return openat2(dirfd, part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                       resolve=RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS)
    except OSError as exc:
        code = exc.errno or 0
        if code in (errno.ENOTDIR, errno.ELOOP) and _is_symlink(dirfd, part):
            code = errno.ELOOP
        raise _refuse(rel, _REASONS.get(code, exc.strerror or str(exc)), tool) from None


def _is_symlink(dirfd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _open_parent(root_fd: int, parts: list[str]) -> int:
    """A directory fd of ``parts`` below ``root_fd``, through no symlink at all."""
    return openat2(root_fd, "/".join(parts) or ".", os.O_RDONLY | os.O_DIRECTORY, resolve=_NO_LINKS)


def lstat_beneath(root_fd: int, rel: str) -> tuple[str, os.stat_result] | None:
    """Walk ``rel`` below ``root_fd`` without following any symlink: the first entry on the way
    that is not a directory (a symlink, a file) — or ``rel`` itself — with its ``lstat``;
    ``None`` when an entry on the way is missing.

    Safe to call on a workspace an untrusted command has just changed: nothing is resolved
    through a path string.
    """
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    for depth, name in enumerate(parts):
        try:
            dirfd = _open_parent(root_fd, parts[:depth])
        except OSError:
            return None  # changed under us since the previous step: gone or not a directory
        try:
            info = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        finally:
            os.close(dirfd)
        if depth == len(parts) - 1 or not stat.S_ISDIR(info.st_mode):
            return "/".join(parts[: depth + 1]), info
    return None


def remove_beneath(root_fd: int, rel: str) -> str | None:
    """Remove the entry ``rel`` itself: a symlink is unlinked (never followed), a directory is
    removed with everything in it (``shutil.rmtree`` on fds, which follows no symlink), and the
    parents are reached through no symlink either.

    A directory is first renamed aside, so its name is gone at once even when its contents
    cannot all be removed (a tree too deep to walk): then the aside name is returned.

    Raises:
        OSError: the entry could not be removed or renamed (it changed under us).
    """
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts:
        raise OSError(errno.EINVAL, "refusing to remove the workspace itself", rel)
    dirfd = _open_parent(root_fd, parts[:-1])
    try:
        info = os.stat(parts[-1], dir_fd=dirfd, follow_symlinks=False)
        if not stat.S_ISDIR(info.st_mode):
            os.unlink(parts[-1], dir_fd=dirfd)
            return None
        aside = f".toolkeeper-removed-{secrets.token_hex(6)}"
        os.rename(parts[-1], aside, src_dir_fd=dirfd, dst_dir_fd=dirfd)
        try:
            shutil.rmtree(aside, dir_fd=dirfd)
        except (OSError, RecursionError):
            return "/".join([*parts[:-1], aside])
        return None
    finally:
        os.close(dirfd)
