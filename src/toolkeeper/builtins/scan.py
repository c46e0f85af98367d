"""What a sandbox must not see of a mounted tree, found by one walk through directory fds.

Before a command runs over a directory, every entry a forbidden-path rule matches — at any depth:
a nested repository's ``.git``, a sub-project's ``.envrc`` — and every toolkeeper state folder
(``state_dirs``) is found, so the sandbox can cover them. The walk opens each directory from its
parent's fd without following any symlink, never enters what it found, and stops (saying so) at
``max_dirs`` directories or ``MAX_DEPTH`` levels: a tree it could not finish is refused by the
caller rather than half-checked. What a directory held is kept between walks (``Scanner``), so
a walk of a tree that barely changed costs one ``lstat`` per directory (docs/benchmarks.md).
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
import threading
import time
from dataclasses import dataclass, field

from .fs import RESOLVE_BENEATH, RESOLVE_NO_MAGICLINKS, RESOLVE_NO_SYMLINKS, openat2
from .policy import SecurityPolicy
from .state_dirs import RULE as STATE_RULE
from .state_dirs import state_in_names

__all__ = ["MAX_DEPTH", "MAX_DIRS", "Found", "Scanner", "TreeScan", "covering_rule"]

MAX_DIRS = 100_000
MAX_DEPTH = 128
_NO_LINKS = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS
_PLACEHOLDER = "\x00"
"""A child name no real entry has: a rule matching ``DIR/<it>`` covers every child of DIR."""


@dataclass(frozen=True)
class Found:
    """One entry a sandbox must not see: where, what it is, and the rule that says so."""

    rel: str
    kind: int
    """Its file type (``stat.S_IFDIR``, ``S_IFREG``, ``S_IFLNK``…), not following symlinks."""
    rule: str
    """The forbidden-path pattern, or ``toolkeeper_state``."""
    inode: int = 0

    @property
    def directory(self) -> bool:
        return self.kind == stat.S_IFDIR


@dataclass(frozen=True)
class TreeScan:
    """What one walk found, and whether it saw the whole tree."""

    found: tuple[Found, ...]
    complete: bool = True
    dirs: int = field(default=0, compare=False)


@dataclass(frozen=True)
class _Listing:
    """What one directory held when it was listed: its protected entries (a state folder:
    itself, never entered) and its other subdirectories (name, inode)."""

    key: tuple[int, int, int] | None
    """(inode, mtime, ctime) when listed; ``None``: changed too recently to trust later."""
    found: tuple[Found, ...]
    subdirs: tuple[tuple[str, int], ...]


class Scanner:
    """Finds the protected entries of trees under one policy (the rules are compiled once).

    A directory's listing is kept between walks, keyed by its inode, modification and change
    times: adding, removing or renaming an entry changes both times (and a change time cannot
    be set back), so a directory whose key is the same holds the same names, and the next walk
    looks at it with one ``lstat`` instead of reading it again. One listed less than two
    seconds after its last change is read again next time (a change within the clock's
    granularity would not move the times). Directories are checked top-down, so a path is only
    looked at once every directory above it is known to be unchanged."""

    RACY_NS = 2_000_000_000

    def __init__(self, policy: SecurityPolicy, *, state_only: bool = False,
                 max_dirs: int = MAX_DIRS) -> None:
        self.policy, self.state_only, self.max_dirs = policy, state_only, max_dirs
        exact: set[str] = set()
        wild: list[str] = []
        for pattern in policy.forbidden_paths:
            last = (pattern[:-2] if pattern.endswith("/*") else pattern).rsplit("/", 1)[-1]
            if any(c in last for c in "*?["):
                wild.append(fnmatch.translate(last))
            else:
                exact.add(last)
        self._exact = frozenset(exact)
        self._wild = re.compile("|".join(wild)) if wild else None
        self._lock = threading.Lock()
        self._cache: dict[str, _Listing] = {}
        self._root: tuple[int, int] | None = None

    def rule_for(self, rel: str, name: str) -> str | None:
        """The forbidden-path rule covering the entry ``rel`` (named ``name``): one matching
        it, or one matching every entry below it (``.claude/*`` covers ``.claude``)."""
        if name not in self._exact and not (self._wild and self._wild.match(name)):
            return None
        return covering_rule(self.policy, rel)

    def scan(self, root_fd: int) -> TreeScan:
        """Walk the tree below ``root_fd``, depth first. The root itself being a state folder
        is found as ``"."``."""
        with self._lock:
            return self._scan(root_fd)

    def _scan(self, root_fd: int) -> TreeScan:
        info = os.fstat(root_fd)
        if self._root != (info.st_dev, info.st_ino):  # another directory: start afresh
            self._root, self._cache = (info.st_dev, info.st_ino), {}
        path = os.readlink(f"/proc/self/fd/{root_fd}")
        seen: dict[str, _Listing] = {}
        found: list[Found] = []
        stack: list[tuple[str, int]] = [("", info.st_ino)]
        complete = True
        while stack:
            rel, inode = stack.pop()
            if len(seen) >= self.max_dirs or rel.count("/") + 1 >= MAX_DEPTH:
                complete = False
                break
            listing = self._listing(root_fd, path, rel, inode)
            if listing is None:
                continue  # gone or swapped since its parent was read: nothing to cover there
            seen[rel] = listing
            found += listing.found
            stack += [(f"{rel}/{name}" if rel else name, number)
                      for name, number in reversed(listing.subdirs)]
        self._cache = seen if complete else {}
        return TreeScan(tuple(found), complete, len(seen))

    def _listing(self, root_fd: int, path: str, rel: str, inode: int) -> _Listing | None:
        """The directory ``rel``'s listing: the one kept, if its key has not changed, else
        read again through directory fds."""
        try:
            info = os.fstat(root_fd) if not rel else os.lstat(f"{path}/{rel}")
        except OSError:
            return None
        if not stat.S_ISDIR(info.st_mode):
            return None  # swapped since its parent was read: its parent is read again next
        kept = self._cache.get(rel)
        if info.st_ino == inode and kept is not None and kept.key == (
                info.st_ino, info.st_mtime_ns, info.st_ctime_ns):
            return kept
        try:
            fd = root_fd if not rel else openat2(root_fd, rel, os.O_RDONLY | os.O_DIRECTORY
                                                 | os.O_NOFOLLOW, resolve=_NO_LINKS)
        except OSError:
            return None
        try:
            return self._read(fd, rel)
        finally:
            if fd != root_fd:
                os.close(fd)

    def _read(self, fd: int, rel: str) -> _Listing:
        """List one directory: its protected entries and other subdirectories."""
        info = os.fstat(fd)
        racy = time.time_ns() - max(info.st_mtime_ns, info.st_ctime_ns) < self.RACY_NS
        key = None if racy else (info.st_ino, info.st_mtime_ns, info.st_ctime_ns)
        try:
            with os.scandir(fd) as listing:
                entries = [(entry.name, _kind(entry), entry.inode()) for entry in listing]
        except OSError:
            return _Listing(None, (), ())
        if state_in_names(name for name, kind, _ in entries if kind == stat.S_IFREG):
            return _Listing(key, (Found(rel or ".", stat.S_IFDIR, STATE_RULE, info.st_ino),), ())
        found: list[Found] = []
        subdirs: list[tuple[str, int]] = []
        for name, kind, number in sorted(entries):
            inner = f"{rel}/{name}" if rel else name
            rule = None if self.state_only else self.rule_for(inner, name)
            if rule is not None:
                found.append(Found(inner, kind, rule, number))
            elif kind == stat.S_IFDIR and not (self.state_only and name == ".git"):
                subdirs.append((name, number))
        return _Listing(key, tuple(found), tuple(subdirs))


def covering_rule(policy: SecurityPolicy, rel: str) -> str | None:
    """The forbidden-path rule matching ``rel``, or matching every entry below it."""
    return policy.forbidden_rule(rel) or policy.forbidden_rule(f"{rel}/{_PLACEHOLDER}")


def _kind(entry: os.DirEntry[str]) -> int:
    """The entry's file type from the directory listing (no system call for the usual
    types)."""
    try:
        if entry.is_symlink():
            return stat.S_IFLNK
        if entry.is_dir(follow_symlinks=False):
            return stat.S_IFDIR
        if entry.is_file(follow_symlinks=False):
            return stat.S_IFREG
        return stat.S_IFMT(entry.stat(follow_symlinks=False).st_mode)
    except OSError:
        return 0
