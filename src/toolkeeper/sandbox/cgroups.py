"""Per-call cgroups: memory and process limits for one sandboxed command, where the host has them.

A cgroup is preferred to ``RLIMIT_AS`` for memory (address-space limits break runtimes
that reserve large virtual ranges: JVMs, Go, V8). When the process may create child cgroups —
cgroup v1 ``memory`` and ``pids`` hierarchies as root, or a cgroup v2 group whose
``cgroup.subtree_control`` already enables ``memory`` and ``pids`` (a delegated systemd scope) —
each call gets its own group under the host's: ``memory`` limit (swap included where the kernel
accounts it), ``pids.max``, the host moves the launcher into it by pid before the launcher runs
anything (``limits.Gate``; the fallback ``preexec_fn`` writes ``0`` to an fd opened
beforehand), and on the way out anything left in it is killed and the group removed.
``probe()`` says what was found; ``toolkeeper doctor`` shows it.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

__all__ = ["CallGroup", "CgroupSupport", "probe"]

_counter = itertools.count()


@dataclass(frozen=True, kw_only=True)
class CgroupSupport:
    """Where per-call groups can be created (``None``: not available)."""

    version: int | None
    memory: Path | None = None
    pids: Path | None = None
    detail: str = ""

    @property
    def available(self) -> bool:
        return self.memory is not None


def _own_groups() -> dict[str, str]:
    """Controller (``""`` for v2) → this process's cgroup path."""
    groups: dict[str, str] = {}
    with open("/proc/self/cgroup") as listing:
        for line in listing:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                groups[controller] = path
    return groups


def _mounts() -> dict[str, Path]:
    """Controller (``""`` for the v2 hierarchy) → mount point."""
    mounts: dict[str, Path] = {}
    with open("/proc/self/mounts") as table:
        for line in table:
            _, point, fstype, options, *_ = line.split()
            if fstype == "cgroup2":
                mounts.setdefault("", Path(point))
            elif fstype == "cgroup":
                for option in options.split(","):
                    if option in ("memory", "pids"):
                        mounts[option] = Path(point)
    return mounts


def _try_group(parent: Path, files: dict[str, str]) -> str | None:
    """Create and remove a trial group under ``parent`` writing ``files``; ``None`` when it
    works, else why not."""
    trial = parent / f"toolkeeper-probe-{os.getpid()}"
    try:
        trial.mkdir()
    except OSError as exc:
        return f"cannot create a group under {parent}: {exc.strerror}"
    try:
        for name, value in files.items():
            (trial / name).write_text(value)
    except OSError as exc:
        return f"cannot set {name} in {parent}: {exc.strerror}"
    finally:
        with contextlib.suppress(OSError):
            trial.rmdir()
    return None


def sweep_stale(parent: Path) -> list[Path]:
    """Remove the groups that toolkeeper processes no longer running left under ``parent``
    (a host killed in the middle of a call cannot remove its own), killing what is still in
    them first: a sandbox a host was starting as it died can wait forever (bubblewrap's init
    blocks until its launcher tells it to go on, and the launcher died with the host).
    Returns the groups removed."""
    removed = []
    for group in parent.glob("toolkeeper-*-*"):
        owner = group.name.split("-")[1]
        if not owner.isdigit() or int(owner) == os.getpid() or Path(f"/proc/{owner}").exists():
            continue
        _kill_members([group], STALE_KILL_S)
        if _removed(group):
            removed.append(group)
    return removed


STALE_KILL_S = 5.0
"""Seconds a sweep spends killing what a dead host's group still holds."""


def _members(dirs: list[Path]) -> set[int]:
    members: set[int] = set()
    for directory in dirs:
        with contextlib.suppress(OSError, ValueError):
            members.update(int(pid) for pid in (directory / "cgroup.procs").read_text().split())
    return members


def _kill_members(dirs: list[Path], timeout_s: float) -> None:
    """SIGKILL every process in ``dirs`` until none is left or ``timeout_s`` has passed. Each
    is held by a pidfd and signalled only if it is still listed once held (the list read once
    for all of them, after they are held): a pid freed and taken meanwhile by a process outside
    the groups is never signalled."""
    deadline = time.monotonic() + timeout_s
    while (members := _members(dirs)) and time.monotonic() < deadline:
        held: dict[int, int] = {}
        try:
            for pid in members:
                with contextlib.suppress(OSError):  # gone already
                    held[pid] = os.pidfd_open(pid)
            listed = _members(dirs)
            for pid, pidfd in held.items():
                if pid in listed:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        finally:
            for pidfd in held.values():
                os.close(pidfd)
        time.sleep(0.005)


def _removed(directory: Path) -> bool:
    """Remove an empty group (a killed process leaves its group a moment after it dies)."""
    for _ in range(200):
        try:
            directory.rmdir()
            return True
        except FileNotFoundError:
            return False
        except OSError:
            time.sleep(0.005)
    return False


@functools.lru_cache(maxsize=1)
def probe() -> CgroupSupport:
    """What this host allows, probed once per process (stale groups of dead hosts swept)."""
    support = _probe()
    for parent in {path for path in (support.memory, support.pids) if path is not None}:
        sweep_stale(parent)
    return support


def _probe() -> CgroupSupport:
    try:
        own, mounts = _own_groups(), _mounts()
    except OSError as exc:
        return CgroupSupport(version=None, detail=f"cannot read the cgroup tables: {exc}")
    if "memory" in own and "memory" in mounts:  # cgroup v1
        memory = mounts["memory"] / own["memory"].lstrip("/")
        why = _try_group(memory, {"memory.limit_in_bytes": str(64 << 20)})
        if why is not None:
            return CgroupSupport(version=1, detail=why)
        pids = None
        if "pids" in own and "pids" in mounts:
            candidate = mounts["pids"] / own["pids"].lstrip("/")
            pids = candidate if _try_group(candidate, {"pids.max": "64"}) is None else None
        return CgroupSupport(version=1, memory=memory, pids=pids,
                             detail=f"cgroup v1 memory{' and pids' if pids else ''} groups")
    if "" in own and "" in mounts:  # cgroup v2
        base = mounts[""] / own[""].lstrip("/")
        try:
            enabled = (base / "cgroup.subtree_control").read_text().split()
        except OSError as exc:
            return CgroupSupport(version=2, detail=f"cannot read {base}: {exc.strerror}")
        if "memory" not in enabled:
            return CgroupSupport(version=2, detail=f"the memory controller is not delegated to "
                                                    f"{base} (cgroup.subtree_control)")
        why = _try_group(base, {"memory.max": str(64 << 20)})
        if why is not None:
            return CgroupSupport(version=2, detail=why)
        return CgroupSupport(version=2, memory=base, pids=base if "pids" in enabled else None,
                             detail="cgroup v2 groups (memory" + (", pids)" if "pids" in enabled
                                                                  else ")"))
    return CgroupSupport(version=None, detail="no cgroup memory controller is mounted")


class CallGroup:
    """The cgroup(s) of one call: ``with CallGroup(support, memory, pids) as group:`` then
    ``group.join()`` in the child before exec."""

    def __init__(self, support: CgroupSupport, *, memory_bytes: int, pids: int) -> None:
        self.support = support
        self.memory_bytes = memory_bytes
        self.pids = pids
        self.dirs: list[Path] = []
        self._fds: list[int] = []

    def __enter__(self) -> CallGroup:
        name = f"toolkeeper-{os.getpid()}-{next(_counter)}"
        support = self.support
        try:
            if support.memory is not None:
                memory = self._make(support.memory / name)
                if support.version == 1:
                    (memory / "memory.limit_in_bytes").write_text(str(self.memory_bytes))
                    with contextlib.suppress(OSError):  # only where swap is accounted
                        (memory / "memory.memsw.limit_in_bytes").write_text(str(self.memory_bytes))
                else:
                    (memory / "memory.max").write_text(str(self.memory_bytes))
                    with contextlib.suppress(OSError):
                        (memory / "memory.swap.max").write_text("0")
            if support.pids is not None:
                # v1: a group in the pids hierarchy; v2: the same group as memory
                pids = self._make(support.pids / name) if support.version == 1 else self.dirs[0]
                (pids / "pids.max").write_text(str(self.pids))
            self._fds = [os.open(d / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
                         for d in self.dirs]
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _make(self, path: Path) -> Path:
        path.mkdir()
        self.dirs.append(path)
        return path

    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` file of each group (writing ``0`` there joins it)."""
        return [str(directory / "cgroup.procs") for directory in self.dirs]

    def join(self) -> None:
        """Move the calling process into the group(s); meant for ``preexec_fn``."""
        for fd in self._fds:
            os.write(fd, b"0")

    def admit(self, pid: int) -> None:
        """Move process ``pid`` into the group(s), from the host (a launcher held until its
        limits are on)."""
        for fd in self._fds:
            os.write(fd, str(pid).encode())

    def oom_killed(self) -> bool:
        """Whether the memory limit killed something in this call."""
        if not self.dirs or self.support.memory is None:
            return False
        memory = self.dirs[0]
        try:
            if self.support.version == 1:
                events = (memory / "memory.oom_control").read_text()
                counters = dict(line.split() for line in events.splitlines() if " " in line)
                if "oom_kill" in counters:
                    return int(counters["oom_kill"]) > 0
                return int((memory / "memory.failcnt").read_text()) > 0
            counters = dict(line.split() for line in
                            (memory / "memory.events").read_text().splitlines())
            return int(counters.get("oom_kill", "0")) > 0
        except (OSError, ValueError):
            return False

    def kill_all(self, timeout_s: float = 60.0) -> None:
        """SIGKILL every process left in the group until it is empty."""
        _kill_members(self.dirs, timeout_s)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds = []
        self.kill_all()
        for directory in reversed(self.dirs):
            _removed(directory)
        self.dirs = []
