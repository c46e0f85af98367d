"""What a sandbox must not see of a mounted tree, found by one walk through directory fds.

Before a command runs over a directory, every entry a forbidden-path rule matches — at any depth:
a nested repository's ``.git``, a sub-project's ``.envrc`` — and every toolkeeper state folder
(``state_dirs``) is found, so the sandbox can cover them. The walk opens each directory from its
parent's fd without following any symlink, never enters what it found, and stops (saying so) at
``max_dirs`` directories or ``MAX_DEPTH`` levels: a tree it could not finish is refused by the
caller rather than half-checked.

Measured on a tree of 10,000 directories and 50,000 files: about 0.1 s (docs/benchmarks.md).
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Iterator
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


class Scanner:
    """Finds the protected entries of trees under one policy (the rules are compiled once)."""

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

    def rule_for(self, rel: str, name: str) -> str | None:
        """The forbidden-path rule covering the entry ``rel`` (named ``name``): one matching
        it, or one matching every entry below it (``.claude/*`` covers ``.claude``)."""
        if name not in self._exact and not (self._wild and self._wild.match(name)):
            return None
        return covering_rule(self.policy, rel)

    def scan(self, root_fd: int) -> TreeScan:
        """Walk the tree below ``root_fd``, depth first, holding one fd per level. The root
        itself being a state folder is found as ``"."``."""
        found: list[Found] = []
        root = os.dup(root_fd)
        subdirs = self._entries(root, "", os.fstat(root).st_ino, found)
        if subdirs is None:
            os.close(root)
            return TreeScan(tuple(found), True, 1)
        stack: list[tuple[int, str, Iterator[tuple[str, int]]]] = [(root, "", iter(subdirs))]
        dirs, complete = 1, True
        try:
            while stack:
                fd, base, pending = stack[-1]
                name, inode = next(pending, ("", 0))
                if not name:
                    os.close(fd)
                    stack.pop()
                    continue
                if dirs >= self.max_dirs or len(stack) >= MAX_DEPTH:
                    complete = False
                    break
                try:
                    child = openat2(fd, name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                                    resolve=_NO_LINKS)
                except OSError:
                    continue  # gone or swapped since the listing: nothing there to cover
                dirs += 1
                rel = f"{base}/{name}" if base else name
                inner = self._entries(child, rel, inode, found)
                if inner is None:
                    os.close(child)
                else:
                    stack.append((child, rel, iter(inner)))
        finally:
            for fd, _, _ in stack:
                os.close(fd)
        return TreeScan(tuple(found), complete, dirs)

    def _entries(self, fd: int, rel: str, inode: int, found: list[Found]
                 ) -> list[tuple[str, int]] | None:
        """Record what one directory (whose inode is ``inode``) holds that is protected, and
        return its other subdirectories; ``None`` (recorded) when it is a state folder."""
        try:
            with os.scandir(fd) as listing:
                entries = [(entry.name, _kind(entry), entry.inode()) for entry in listing]
        except OSError:
            return []
        if state_in_names(name for name, kind, _ in entries if kind == stat.S_IFREG):
            found.append(Found(rel or ".", stat.S_IFDIR, STATE_RULE, inode))
            return None
        subdirs: list[tuple[str, int]] = []
        for name, kind, number in entries:
            inner = f"{rel}/{name}" if rel else name
            rule = None if self.state_only else self.rule_for(inner, name)
            if rule is not None:
                found.append(Found(inner, kind, rule, number))
            elif kind == stat.S_IFDIR and not (self.state_only and name == ".git"):
                subdirs.append((name, number))
        return subdirs


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
