"""Which processes are running a given command, for the tests that check nothing outlives a
call."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["running"]


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
