"""Protected paths inside a sandbox: the one rule set that ``shell``, ``git_operations`` and code
mode's workspace mount share with the file tools (``SecurityPolicy.forbidden_paths`` and the
toolkeeper state folders).

Before a run, one walk of the mounted directory through directory fds (``scan.Scanner``) finds
every protected entry at any depth — ``.git`` of the repository and of any nested one, a
sub-project's ``.envrc``, any toolkeeper state folder — and a backend that can hide entries
(bubblewrap) covers each, so the command can neither read nor change it.

Writes go through a copy-on-write view where the backend can make one (``overlays``): the
command's changes land in a private upper layer outside the directory, and the host applies
them after the run, refusing every protected path (``overlay.apply_upper``) — a protected path
the command creates is never in the directory, not even while the command runs.

Where there is no such view (Landlock, or running unconfined), the command writes the directory
itself: the run is refused while a protected entry exists (Landlock cannot hide one), and after
it whatever now stands at a protected path and did not before is removed — unlinked, never
followed.

Everything here works through directory fds: after an untrusted command has run, the
directory is hostile.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from ..errors import PolicyViolationError
from ..sandbox.base import HiddenPath, Overlay, Sandbox
from ..sandbox.overlay import remove_overlay
from .fs import Workspace, remove_beneath
from .overlay import Applied, Judge, applied_note, apply_upper
from .policy import SecurityPolicy
from .scan import MAX_DEPTH, Scanner, TreeScan, covering_rule
from .state_dirs import RULE as STATE_RULE
from .state_dirs import STATE_FILES

__all__ = ["Protection", "removed_note"]


class Protection:
    """The protected entries of one directory (``root``, the policy's workspace by default)
    under one policy, for the sandboxes that mount it. ``state_only``: only toolkeeper state
    folders are hidden (``git_operations``, which must see the repository as it is).

    The directory is opened once, here; paths below it are only ever reached through fds.
    """

    def __init__(self, policy: SecurityPolicy, root: Path | None = None, *,
                 state_only: bool = False) -> None:
        self.policy = policy
        self.ws = Workspace(root if root is not None else policy.workspace)
        self.scanner = Scanner(policy, state_only=state_only)

    @property
    def root(self) -> Path:
        return self.ws.root

    def close(self) -> None:
        self.ws.close()

    def state(self) -> TreeScan:
        """Every protected entry of the directory now."""
        return self.scanner.scan(self.ws.fd)

    @staticmethod
    def hidden(scan: TreeScan) -> tuple[HiddenPath, ...]:
        """The protected entries a sandbox can hide: all but symlinks (a bind follows a
        symlink, and must never bring in a path from outside; a symlink's target is judged
        where it points)."""
        return tuple(HiddenPath(found.rel, directory=found.directory) for found in scan.found
                     if found.kind != stat.S_IFLNK and found.rel != ".")

    def prepare(self, sandbox: Sandbox, scan: TreeScan, *, tool: str
                ) -> tuple[HiddenPath, ...]:
        """What ``sandbox`` must hide for a run that starts from ``scan``.

        Raises:
            PolicyViolationError: the directory is itself a toolkeeper state folder; it is too
                large or too deep to check; or ``sandbox`` cannot hide paths (Landlock) and a
                protected entry exists.
        """
        if any(found.rel == "." for found in scan.found):
            raise PolicyViolationError(
                f"{self.root} holds toolkeeper state (tokens, approvals, audit), which no tool "
                f"reads or writes (rule {STATE_RULE}); move the state out of it, or use "
                "another directory", tool_name=tool, details={"rule": STATE_RULE})
        if not scan.complete:
            raise PolicyViolationError(
                f"{self.root} has more than {self.scanner.max_dirs} directories or is deeper "
                f"than {MAX_DEPTH} levels: too large to check for protected paths before a "
                "command runs (rule workspace.size); use a smaller workspace", tool_name=tool,
                details={"rule": "workspace.size"})
        if sandbox.protects_paths:
            return self.hidden(scan)
        if scan.found:
            shown = ", ".join(f.rel for f in scan.found[:5]) + (
                " …" if len(scan.found) > 5 else "")
            raise PolicyViolationError(
                f"{shown} in {self.root} {'is' if len(scan.found) == 1 else 'are'} protected "
                f"(rule security.forbidden_paths, or toolkeeper state) and the {sandbox.name} "
                "sandbox cannot hide them from a command; install bubblewrap (Debian: apt-get "
                "install bubblewrap) with unprivileged user namespaces allowed, or remove the "
                "rule from security.forbidden_paths", tool_name=tool,
                details={"rule": "forbidden_paths", "paths": [f.rel for f in scan.found]})
        return ()

    def judge(self, rel: str, directory: bool = False) -> str | None:
        """Why a run may not change ``rel``: a forbidden-path rule, a file named like
        toolkeeper state, or a read-only policy. A rule covering every entry below ``rel``
        (``.claude/*``) refuses ``rel`` itself whatever it is: a symlink of that name would
        make its target's files the protected ones (``.claude -> cl``, then
        ``cl/settings.json``)."""
        rule = covering_rule(self.policy, rel)
        if rule is not None:
            return f"rule security.forbidden_paths {rule!r}"
        if not directory and rel.rsplit("/", 1)[-1] in STATE_FILES:
            return f"a file of that name marks toolkeeper state, rule {STATE_RULE}"
        if self.policy.read_only or self.policy.autonomy == "read_only":
            return "the workspace is read-only, rule security.autonomy"
        return None

    def apply(self, overlay: Overlay, judge: Judge | None = None,
              before: TreeScan | None = None) -> Applied:
        """Apply a run's writes (``overlay``'s upper layer) to the directory, each change
        judged by ``judge`` (default: ``self.judge``). Call it only once every process of the
        run is gone. The directories it makes stay within what the scan before the next run
        can check (``MAX_DEPTH`` levels; with ``before``, the scan the run started from, the
        room left below the scanner's ``max_dirs``): a run that made more would have every
        later run of every client refused (rule ``workspace.size``)."""
        room = self.scanner.max_dirs - (before.dirs if before is not None else 0) - 1
        upper = os.open(overlay.upper, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                        | os.O_CLOEXEC)
        try:
            return apply_upper(upper, self.ws.fd, judge or self.judge, new_dirs=max(0, room),
                               max_depth=MAX_DEPTH)
        finally:
            os.close(upper)

    def remove_created(self, before: TreeScan) -> list[str]:
        """Remove whatever stands at a protected path now and did not in ``before`` (the scan
        the run started from) — a run that wrote the directory itself — unlinked, never
        followed. An entry that was there before (the same inode) is left alone: a change to
        it is the host's own. Call it only once every process of the run is gone. Returns the
        entries removed (or why one could not be)."""
        was = {(found.rel, found.inode) for found in before.found}
        removed: list[str] = []
        for found in self.state().found:
            if (found.rel, found.inode) in was or found.rule == STATE_RULE:
                continue  # a folder holding a file named like a token is no state to remove
            try:
                aside = remove_beneath(self.ws.fd, found.rel)
            except OSError as exc:
                removed.append(f"{found.rel} (could not be removed: {exc.strerror}; remove it "
                               "by hand)")
                continue
            removed.append(found.rel if aside is None else f"{found.rel} (moved to {aside})")
        return removed


    def settle(self, before: TreeScan, overlay: Overlay | None, who: str,
               judge: Judge | None = None) -> str:
        """After a run (every process gone): apply its writes from ``overlay`` and remove the
        view, or — a run that wrote the directory itself — remove the protected entries it
        created. Returns the line the answer carries about what was refused ("" if nothing
        was)."""
        if overlay is None:
            removed = self.remove_created(before)
            return removed_note(who, removed) if removed else ""
        try:
            return applied_note(who, self.apply(overlay, judge, before))
        finally:
            remove_overlay(overlay)


def removed_note(who: str, removed: Sequence[str]) -> str:
    """The line a tool's answer carries when a run that wrote the directory itself created
    protected paths."""
    return (f"[refused: {who} created protected paths ({', '.join(removed)}); they were "
            "removed (rule security.forbidden_paths)]")
