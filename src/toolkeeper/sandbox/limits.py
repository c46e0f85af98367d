"""Putting a command behind its limits: the call's cgroup, the rlimits and the uid drop."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import resource
import shutil
from collections.abc import Callable, Iterator

from .base import CONCURRENT_CALLS, SYSTEM_PATH, UNPRIVILEGED_UID, Limits
from .cgroups import CallGroup
from .cgroups import probe as cgroup_probe

__all__ = ["Gate", "call_group", "counted_inside", "drop_uid", "exec_helpers", "gated",
           "limited", "rlimits_for", "setpriv_prefix"]

log = logging.getLogger("toolkeeper.sandbox")


def _preexec(limits: Limits, group: CallGroup | None = None, *, drop_root: bool = True
             ) -> None:
    # Runs between fork and exec: no imports, no allocation-heavy work.
    if group is not None:
        group.join()  # before the uid drop: joining needs the host's rights
    if drop_root and os.geteuid() == 0:
        os.setgroups([])
        os.setgid(UNPRIVILEGED_UID)
        os.setuid(UNPRIVILEGED_UID)
    for which, value in rlimits_for(limits, group, nproc=True):
        resource.setrlimit(which, value)


def rlimits_for(limits: Limits, group: CallGroup | None, *, nproc: bool
             ) -> list[tuple[int, tuple[int, int]]]:
    """The rlimits of a command: no core dumps, CPU, file size, open files, processes (unless
    counted inside the sandbox) and address space where no memory cgroup bounds the call."""
    found = [(resource.RLIMIT_CORE, (0, 0)),
             (resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1)),
             (resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes)),
             (resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))]
    if nproc:
        count = _nproc(limits, group)
        found.append((resource.RLIMIT_NPROC, (count, count)))
    if group is None or group.support.memory is None:
        found.append((resource.RLIMIT_AS, (limits.memory, limits.memory)))
    return found


def _nproc(limits: Limits, group: CallGroup | None) -> int:
    """RLIMIT_NPROC counts every process of the sandbox uid, across concurrent calls: with a
    per-call ``pids.max`` bounding each call, it is only a backstop, so one call's fork bomb
    does not starve the others."""
    if group is not None and group.support.pids is not None:
        return limits.processes * CONCURRENT_CALLS
    return limits.processes


@contextlib.contextmanager
def call_group(limits: Limits) -> Iterator[CallGroup | None]:
    """The call's cgroup when the host allows one (memory and process limits for the whole
    call; whatever is left in it is killed on the way out), else ``None``."""
    support = cgroup_probe()
    if not support.available:
        yield None
        return
    group = CallGroup(support, memory_bytes=limits.memory, pids=limits.processes)
    try:
        group.__enter__()
    except OSError as exc:  # the host took the right away since the probe: per-process limits
        log.warning("no cgroup for this call (%s); limiting address space instead", exc)
        yield None
        return
    try:
        yield group
    finally:
        group.__exit__(None, None, None)


@functools.lru_cache(maxsize=1)
def exec_helpers() -> tuple[str, str, str] | None:
    """util-linux's ``prlimit`` and ``setpriv`` and a POSIX ``sh``, when installed (Debian:
    always)."""
    found = tuple(shutil.which(name, path=SYSTEM_PATH) for name in ("prlimit", "setpriv", "sh"))
    return found if all(found) else None  # type: ignore[return-value]


# Moves the shell into each cgroup named before "--", then becomes the rest of the command line.


_JOIN_GROUPS = ('for f do [ "$f" = -- ] && break; echo 0 > "$f" || exit 126; shift; done; '
                'shift; exec "$@"')


def counted_inside(command: list[str], limits: Limits) -> list[str] | None:
    """``command`` with its process limit set inside the sandbox's own user namespace, or
    ``None`` where util-linux's ``prlimit`` is missing.

    ``RLIMIT_NPROC`` counts the processes of a uid *in a user namespace* (Linux 5.14 and
    later): set inside a fresh namespace it counts the sandbox's own processes only — not the
    server's threads, nor other calls' sandboxes, which share the uid outside. Set outside,
    before the namespace exists, it would count every task of the uid (and bound the
    namespace's creation by them too)."""
    helpers = exec_helpers()
    if helpers is None:
        return None
    return [helpers[0], f"--nproc={limits.processes}", "--", *command]


def limited(argv: list[str], limits: Limits, group: CallGroup | None, *, drop_root: bool,
            nproc: bool = True) -> tuple[list[str], Callable[[], None] | None]:
    """``argv`` behind the call's limits: the cgroup join, the rlimits and the uid drop.

    A ``preexec_fn`` would do all three between fork and exec, but it forces CPython to
    ``fork`` the whole host instead of ``vfork``: measured 3.5 ms per call with toolkeeper
    imported and 27 ms with the embedding model loaded (465 MB resident). So the limits are set
    by small programs that exec the next — ``sh`` (join the cgroup), util-linux's ``prlimit`` and
    ``setpriv`` (``--reuid/--regid --clear-groups``; the saved uid follows at exec) — and the
    ``preexec_fn`` is only the fallback where those are not installed. ``nproc=False``: the
    process limit is set inside the sandbox (``counted_inside``), not here.
    """
    helpers = exec_helpers()
    if helpers is None:
        return argv, functools.partial(_preexec, limits, group, drop_root=drop_root)
    prlimit, setpriv, sh = helpers
    prefix: list[str] = []
    if group is not None:
        prefix += [sh, "-c", _JOIN_GROUPS, "sh", *group.procs_files(), "--"]
    prefix += [prlimit, "--core=0", f"--cpu={limits.cpu_s}:{limits.cpu_s + 1}",
               f"--fsize={limits.file_bytes}", f"--nofile={limits.open_files}"]
    if nproc:
        prefix.append(f"--nproc={_nproc(limits, group)}")
    if group is None or group.support.memory is None:
        prefix.append(f"--as={limits.memory}")
    prefix.append("--")
    return prefix + setpriv_prefix(setpriv, drop_root) + argv, None


def drop_uid(drop_root: bool) -> int | None:
    """The uid a command runs as when a root host drops root (``None``: it keeps the host's)."""
    return UNPRIVILEGED_UID if drop_root and os.geteuid() == 0 else None


def setpriv_prefix(setpriv: str, drop_root: bool) -> list[str]:
    """``setpriv`` to the unprivileged uid and gid with no supplementary groups when a root
    host drops root, else nothing: what a spare gate does itself before its ``exec``."""
    uid = drop_uid(drop_root)
    if uid is None:
        return []
    return [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]


# Waits on stdin for the host's word, then runs the rest of the command line with stdin from
# /dev/null; end of input without the word (the host failed or died) runs nothing.
_GATE = ('read -r word && [ "$word" = go ] && exec "$@" </dev/null; '
         'echo "toolkeeper: the command was not started: its limits could not be set" >&2; '
         'exit 126')


class Gate:
    """A command held at its first instruction until its limits are on.

    ``sh`` is started reading a pipe; the host moves it into the call's cgroup (by pid) and
    sets its rlimits (``resource.prlimit``), then writes the word that lets it ``exec`` the
    rest. Until then ``sh`` runs nothing but ``read``, so no code of the command's runs before
    its limits, and everything it starts inherits them. One ``exec`` fewer than a launcher
    program per limit, and no ``preexec_fn`` (CPython keeps ``vfork``)."""

    def __init__(self, limits: Limits, group: CallGroup | None, *, nproc: bool) -> None:
        self.rlimits = rlimits_for(limits, group, nproc=nproc)
        self.group = group
        self.stdin, self._word = os.pipe()

    def release(self, pid: int) -> None:
        """Put the limits on ``pid`` (our own unreaped child: its pid cannot be reused) and
        let it go on; if any cannot be set, it is never let go (it exits 126)."""
        os.close(self.stdin)
        try:
            if self.group is not None:
                self.group.admit(pid)
            for which, value in self.rlimits:
                resource.prlimit(pid, which, value)
            os.write(self._word, b"go\n")
        except (OSError, ValueError) as exc:  # ValueError: a limit the kernel cannot take
            log.warning("a command was not started: its limits could not be set (%s)", exc)
        finally:
            os.close(self._word)

    def abandon(self) -> None:
        """The command was never started: close both ends."""
        for fd in (self.stdin, self._word):
            with contextlib.suppress(OSError):
                os.close(fd)


def gated(argv: list[str], limits: Limits, group: CallGroup | None, *, drop_root: bool,
          nproc: bool = True) -> tuple[list[str], Gate] | None:
    """``argv`` behind ``sh`` held at a :class:`Gate` (and ``setpriv`` when a root host drops
    to the unprivileged uid), or ``None`` where the helpers are not installed (``limited``)."""
    helpers = exec_helpers()
    if helpers is None:
        return None
    _, setpriv, sh = helpers
    return ([sh, "-c", _GATE, "sh", *setpriv_prefix(setpriv, drop_root), *argv],
            Gate(limits, group, nproc=nproc))
