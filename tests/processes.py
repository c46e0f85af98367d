"""Which processes are running a given command, for the tests that check nothing outlives a
call."""

from __future__ import annotations

import os
import selectors
from collections.abc import Sequence
from pathlib import Path
from subprocess import Popen
from typing import IO, Any

__all__ = ["descendants", "no_traceback", "readable", "running"]


def readable(streams: Sequence[IO[Any]], timeout_s: float) -> list[IO[Any]]:
    """The streams that can be read without blocking, waiting up to ``timeout_s`` for one
    (``select.select`` fails on a descriptor numbered 1024 or more, which a long run reaches)."""
    with selectors.DefaultSelector() as selector:
        for stream in streams:
            selector.register(stream, selectors.EVENT_READ)
        return [key.fileobj for key, _ in selector.select(timeout_s)]  # type: ignore[misc]


def running(command: str) -> list[int]:
    """Pids of the processes whose arguments include ``command``'s words in a row (``sleep 42``
    is ``sleep`` then ``42``): a shell whose one argument merely contains the text, such as
    ``bash -c "sleep 420; ..."``, does not count."""
    words = command.encode().split()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(argv[i:i + len(words)] == words for i in range(len(argv))):
            found.append(int(entry))
    return found


def descendants(pid: int) -> dict[int, list[bytes]]:
    """The processes below ``pid`` (children, theirs, ...), each with its arguments."""
    parents: dict[int, int] = {}
    argvs: dict[int, list[bytes]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
            argvs[int(entry)] = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        parents[int(entry)] = int(stat[stat.rindex(b")") + 2:].split()[1])
    below: dict[int, list[bytes]] = {}
    todo = [pid]
    while todo:
        parent = todo.pop()
        for child, its_parent in parents.items():
            if its_parent == parent and child not in below:
                below[child] = argvs[child]
                todo.append(child)
    return below


def no_traceback(proc: Popen[str]) -> None:
    """Assert that a stopped server printed no traceback, showing all it printed if it did
    (the diff pytest would show cuts it to a few lines)."""
    assert proc.stderr is not None
    said = proc.stderr.read()
    assert "Traceback" not in said, said
