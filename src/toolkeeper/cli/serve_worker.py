"""One worker of ``toolkeeper serve --workers N``, as the supervisor (``serve_workers``) starts
it: ``python -P -m toolkeeper.cli.serve_worker``, handed on its stdin the supervisor's import
path and the settings (the port already chosen, ``worker`` its number).

It runs the same lifecycle as a server of one process (``serve_run``), on a socket of its own
joined to the others on the port, with two differences: its start lines go to the supervisor
(through the pipe named in the hand-off), which says them once for all the workers and keeps
the server file; and it stops as if sent SIGTERM when its stdin ends — the supervisor is gone,
even killed with SIGKILL, so no worker serves on alone. A stdin that ends before the hand-off
ends the worker in one line (quietly if a stop signal came), never with a traceback.

The supervisor stops its workers with SIGTERM: until this module has taken the signals (while
the interpreter starts and imports toolkeeper) its default action ends the worker silently.

``-P`` keeps the current directory (by default the workspace, which tools write to) off the
import path while the worker starts; then it takes the supervisor's own path, so a target
module loads as it would in one process.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import sys
import threading
from functools import partial
from typing import BinaryIO

import typer

from .lifecycle import Lifecycle
from .serve_cmd import guarded
from .serve_run import run
from .serve_settings import ServeSettings

__all__ = ["main"]


def main() -> None:
    """Serve as the worker the hand-off on stdin describes, until stopped or orphaned."""
    life = Lifecycle()
    life.install()
    stdin = sys.stdin.buffer
    try:
        path, ready_fd, blob = pickle.load(stdin)  # the supervisor's, through a pipe of its own
    except (EOFError, pickle.UnpicklingError):  # the supervisor ended before handing off
        if life.stopping():
            life.end()  # stopped while starting: quietly, as the signal asks
        raise SystemExit("toolkeeper: a worker is started by toolkeeper serve --workers N "
                         "(no hand-off on its stdin: the supervisor ended first)") from None
    sys.path[:] = path
    settings = pickle.loads(blob)
    if not isinstance(settings, ServeSettings):
        raise SystemExit("toolkeeper: a worker is started by toolkeeper serve --workers N")
    threading.Thread(target=_orphaned, args=(stdin,), name="toolkeeper-supervisor",
                     daemon=True).start()
    try:
        guarded(life, lambda: run(settings, life, partial(_ready, ready_fd)))
    except typer.Exit as exit_:
        sys.exit(exit_.exit_code)


def _ready(fd: int, lines: list[str]) -> None:
    """Hand the start lines to the supervisor: this worker serves."""
    data = (json.dumps(lines) + "\n").encode()
    while data:
        data = data[os.write(fd, data):]
    os.close(fd)


def _orphaned(stdin: BinaryIO) -> None:
    """The supervisor holds this pipe open while it runs: its end is the stop."""
    stdin.read()
    os.kill(os.getpid(), signal.SIGTERM)


if __name__ == "__main__":
    main()
