"""Protected paths inside a sandbox: the one rule set that ``shell`` and code mode's workspace
mount share with the file tools (``SecurityPolicy.forbidden_paths``).

Before a run, the protected entries of the mounted directory are found through directory fds:
the policy's paths without wildcards (``.git/config``, ``.git/hooks``, ``.envrc``, …) and the
root entries a wildcard rule matches (``toolkeeper.db-wal``), from one listing of the root. A
backend that can hide entries (bubblewrap) covers each existing one reached through real
directories — never a symlink — so the command can neither read nor change it. After the run,
whatever now stands for a protected path and did not before (the path itself, a symlink or a
file planted on the way to it) is removed, unlinked and never followed: a rule holds for files
that did not exist yet too. A backend that cannot hide (Landlock) runs only while no protected
entry exists; the clean-up after the run is the same.

Everything here works through directory fds: after an untrusted command has run, the
workspace is hostile.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import PolicyViolationError
from ..sandbox.base import HiddenPath, Sandbox
from .fs import Workspace, lstat_beneath, remove_beneath
from .policy import SecurityPolicy

__all__ = ["ProtectedState", "Protection", "removed_note"]

Seen = tuple[str, int, int, int]
"""The entry that stands for a protected path (itself, or the first symlink or file on the way)
with its device, inode and file type."""
ProtectedState = Mapping[str, Seen | None]
"""Each protected path of a mounted directory, and what stands for it (``None``: absent)."""


class Protection:
    """The protected paths of one directory (``root``, the policy's workspace by default)
    under one policy, for the sandboxes that mount it.

    The directory is opened once, here; paths below it are only ever reached through fds.
    """

    def __init__(self, policy: SecurityPolicy, root: Path | None = None) -> None:
        self.policy = policy
        self.ws = Workspace(root if root is not None else policy.workspace)

    @property
    def root(self) -> Path:
        return self.ws.root

    def close(self) -> None:
        self.ws.close()

    def _paths(self) -> list[str]:
        """The policy's protected paths, then the root entries a forbidden rule matches
        (wildcard rules such as ``toolkeeper.db-*``): one listing of the root, by fd."""
        paths = list(self.policy.protected_paths())
        try:
            names = sorted(os.listdir(self.ws.fd))
        except OSError:
            names = []
        paths += [name for name in names
                  if name not in paths and self.policy.forbidden_rule(name) is not None]
        return paths

    def state(self) -> ProtectedState:
        """What stands for each protected path now (``None`` when it is absent)."""
        state: dict[str, Seen | None] = {}
        for rel in self._paths():
            found = lstat_beneath(self.ws.fd, rel)
            state[rel] = None if found is None else (
                found[0], found[1].st_dev, found[1].st_ino, stat.S_IFMT(found[1].st_mode))
        return state

    @staticmethod
    def hidden(state: ProtectedState) -> tuple[HiddenPath, ...]:
        """The existing protected entries a sandbox can hide: reached through real
        directories and not symlinks themselves (a bind follows a symlink, and must never
        bring in a path from outside)."""
        return tuple(HiddenPath(rel, directory=seen[3] == stat.S_IFDIR)
                     for rel, seen in state.items()
                     if seen is not None and seen[0] == rel and seen[3] != stat.S_IFLNK)

    @staticmethod
    def reachable(state: ProtectedState) -> list[str]:
        """The protected paths a command could open now: existing, or behind a symlink."""
        return [rel for rel, seen in state.items()
                if seen is not None and (seen[0] == rel or seen[3] == stat.S_IFLNK)]

    def prepare(self, sandbox: Sandbox, state: ProtectedState, *, tool: str
                ) -> tuple[HiddenPath, ...]:
        """What ``sandbox`` must hide for a run that starts from ``state``.

        Raises:
            PolicyViolationError: ``sandbox`` cannot hide paths (Landlock) and a protected
                path exists (or a symlink stands on the way to one).
        """
        if sandbox.protects_paths:
            return self.hidden(state)
        reachable = self.reachable(state)
        if reachable:
            shown = ", ".join(reachable[:5]) + (" …" if len(reachable) > 5 else "")
            raise PolicyViolationError(
                f"{shown} in {self.root} {'is' if len(reachable) == 1 else 'are'} protected "
                f"(rule security.forbidden_paths) and the {sandbox.name} sandbox cannot hide "
                "them from a command; install bubblewrap (Debian: apt-get install bubblewrap) "
                "with unprivileged user namespaces allowed, or remove the rule from "
                "security.forbidden_paths", tool_name=tool,
                details={"rule": "forbidden_paths", "paths": reachable})
        return ()

    def remove_created(self, before: ProtectedState) -> list[str]:
        """Remove whatever stands for a protected path now and did not in ``before`` (the
        state the run started from): the path itself, or the symlink or file planted on the
        way to it — unlinked, never followed. A path that existed as itself is left alone: a
        sandbox that hides kept the run away from it, so a change is the host's own (an
        editor saving ``.envrc``). Call it only once every process of the run is gone.
        Returns the entries removed (or why one could not be)."""
        removed: list[str] = []
        done: set[str] = set()
        for rel, now in self.state().items():
            was = before.get(rel)
            if now is None or now == was or now[0] in done or (
                    was is not None and was[0] == rel and was[3] != stat.S_IFLNK):
                continue
            entry = now[0]
            done.add(entry)
            try:
                aside = remove_beneath(self.ws.fd, entry)
            except OSError as exc:
                removed.append(f"{entry} (could not be removed: {exc.strerror}; remove it by "
                               "hand)")
                continue
            removed.append(entry if aside is None else f"{entry} (moved to {aside})")
        return removed


def removed_note(who: str, removed: Sequence[str]) -> str:
    """The line a tool's answer carries when a run created protected paths."""
    return (f"[refused: {who} created protected paths ({', '.join(removed)}); they were "
            "removed (rule security.forbidden_paths)]")
