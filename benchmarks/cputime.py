"""A server process's CPU time, read from Linux's ``/proc``: what bench_serve.py divides by the
calls a run answered to get CPU time per call — a figure other jobs on the machine barely move,
because it counts only the time the server itself was running.

The processes measured are those that hold the listening socket: a server started through a
wrapper (``taskset`` execs, so it keeps the wrapper's PID; a launcher that forks does not) is
measured where it serves, found through the socket's inode; a server with worker processes
sharing one socket is measured as all of them together."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["CLOCK_TICKS", "MIN_TICKS", "CpuClock", "cpu_ticks", "parse_stat", "serving_pids"]

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
"""Clock ticks a second: the unit of ``/proc/PID/stat``'s times (100 on most kernels)."""
MIN_TICKS = 100
"""Fewer ticks than this in one run make its CPU figure coarse (a tick is 1 % of it or more)."""
PROC = Path("/proc")


def parse_stat(text: str) -> int:
    """User plus system time, in clock ticks, from the text of ``/proc/PID/stat`` (fields 14
    and 15, ``utime`` and ``stime``: every thread of the process, ended threads included).
    The command name (field 2) is in parentheses and may hold spaces or parentheses itself,
    so the fields are counted from its closing parenthesis, the last one in the line."""
    head, paren, rest = text.rpartition(")")
    fields = rest.split()
    if not paren or not head or len(fields) < 13:
        raise ValueError(f"not a /proc/PID/stat line: {text[:80]!r}")
    return int(fields[11]) + int(fields[12])  # fields[0] is field 3 (the state)


def cpu_ticks(pid: int) -> int:
    """The CPU time process ``pid`` has used so far, in clock ticks."""
    try:
        return parse_stat((PROC / str(pid) / "stat").read_text())
    except FileNotFoundError:
        raise SystemExit(f"the server process {pid} ended during the benchmark: its CPU "
                         "time cannot be read") from None


class CpuClock:
    """The CPU time of some processes together across a stretch of work: ``start()`` before,
    ``stop()`` after, which returns the ticks they used in between."""

    def __init__(self, pids: tuple[int, ...]) -> None:
        self.pids = pids
        self._began = 0

    def _now(self) -> int:
        return sum(cpu_ticks(pid) for pid in self.pids)

    def start(self) -> None:
        self._began = self._now()

    def stop(self) -> int:
        return self._now() - self._began


def _listening_inodes(port: int) -> set[str]:
    """Inodes of the TCP sockets listening on ``port`` (state 0A in ``/proc/net/tcp*``)."""
    inodes = set()
    for table in ("tcp", "tcp6"):
        path = PROC / "net" / table
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def _family(pid: int) -> Iterator[int]:
    """``pid`` and its descendants, parents first."""
    yield pid
    for task in (PROC / str(pid) / "task").glob("*/children"):
        for child in task.read_text().split():
            yield from _family(int(child))


def _holds(pid: int, inodes: set[str]) -> bool:
    try:
        links = [os.readlink(fd) for fd in (PROC / str(pid) / "fd").iterdir()]
    except (FileNotFoundError, PermissionError):
        return False
    return any(link.startswith("socket:[") and link[8:-1] in inodes for link in links)


def serving_pids(pid: int, port: int) -> tuple[int, ...]:
    """The processes, ``pid`` or its descendants, that hold the socket listening on ``port``:
    those whose CPU time is the server's. A wrapper that only waits for its child would count
    next to nothing; this finds the child."""
    inodes = _listening_inodes(port)
    found = tuple(candidate for candidate in _family(pid) if _holds(candidate, inodes))
    if found:
        return found
    raise SystemExit(f"no process started as {pid} listens on port {port}: "
                     "the CPU time of the server cannot be read")
