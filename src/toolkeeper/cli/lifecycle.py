"""How ``toolkeeper serve`` stops when it is asked to (SIGTERM, SIGINT/Ctrl-C), whatever it is
doing at that moment.

Serve owns both signals from the first line of the command to the end of the process: a signal
that came before the server was listening used to meet whatever handler was there (Python's
``KeyboardInterrupt``, asyncio's runner cancelling the main task mid-start, uvicorn's), and ended
in a traceback or in a server that had swallowed its stop and served on. Now:

- **while starting** (loading the config, opening stores, building tools), a signal ends the
  start at its next step and the process ends quietly;
- **while serving**, the first signal starts the stop in the event loop: calls waiting for a
  person are answered ``pending`` at once (the request stays stored, to be decided and taken by
  the call made again), calls in flight have ``DRAIN_S`` to finish and are then cancelled and
  answered, the server file is removed and the audit rows are flushed;
- a second signal, or a stop that is still not done ``DEADLINE_S`` after the first signal (a
  thread stuck in a system call, an upstream that does not exit), ends the process at once,
  with one line saying what it was waiting for.

The process ends as a stopped process does: killed by SIGTERM, or exit status 130 for SIGINT.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType

from ..startup import take

__all__ = ["DEADLINE_S", "DRAIN_S", "Lifecycle", "Stopped"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
DRAIN_S = 1
"""Seconds calls in flight have to finish once a stop begins; then they are cancelled."""
DEADLINE_S = 4.0
"""Seconds after the first signal by which the process ends, whatever it waits for."""


class Stopped(BaseException):
    """A stop signal arrived while serve was starting (raised by ``Lifecycle.check`` between
    two steps of the start, never from inside a library): unwinds the start."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Lifecycle:
    """The stop signals of one ``toolkeeper serve`` process, from start to exit."""

    def __init__(self, *, deadline_s: float = DEADLINE_S) -> None:
        self.signum: int | None = None
        """The first stop signal received, if any."""
        self.phase = "starting"
        """What the process is doing (the line printed if the deadline passes names it)."""
        self.deadline_s = deadline_s
        self.at_once: Callable[[], None] | None = None
        """What must still happen when the process ends at once (a second signal, the
        deadline): a supervisor kills its workers, so that none is left behind."""
        self._begin: Callable[[], None] | None = None

    def install(self) -> None:
        """Take both signals (the first thing serve does). While starting, a signal is only
        recorded: the start ends at its next step (``check``), the deadline bounding it."""
        held = take()  # a Ctrl-C while the command loaded (python -m … of a worker)
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._on_signal)
        if held is not None:
            self._received(held)

    def check(self) -> None:
        """Between two steps of the start: unwind it if a stop signal has arrived."""
        if self.signum is not None:
            raise Stopped(self.signum)

    def serving(self, loop: asyncio.AbstractEventLoop, begin: Callable[[], None]) -> None:
        """From now on a signal calls ``begin`` in ``loop`` (once). Call it from inside the
        loop; a signal received before begins at once."""
        self._begin = begin
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, self._received, sig)
        if self.signum is not None:
            begin()

    def stopping(self) -> bool:
        return self.signum is not None

    def at(self, phase: str) -> None:
        self.phase = phase

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self._received(signum)

    def _received(self, signum: int) -> None:
        """The first signal starts the stop (and its deadline); a second ends it now."""
        if self.signum is not None:
            self._end_now(f"a second {signal.Signals(signum).name}: stopped at once while "
                          f"{self.phase}")
        self.signum = signum
        threading.Thread(target=self._watch, name="toolkeeper-stop-deadline",
                         daemon=True).start()
        if self._begin is not None:
            self.phase = "stopping"
            self._begin()

    def _watch(self) -> None:
        time.sleep(self.deadline_s)
        self._end_now(f"not stopped {self.deadline_s:g} s after the signal (still "
                      f"{self.phase}); stopped at once")

    def _end_now(self, why: str) -> None:
        try:
            print(f"toolkeeper: {why}", file=sys.stderr, flush=True)
            if self.at_once is not None:
                self.at_once()
        finally:
            os._exit(self.exit_status())

    def exit_status(self) -> int:
        """The status of a process ended by the signal received (128 + its number)."""
        return 128 + (self.signum or signal.SIGTERM)

    def end(self) -> None:
        """End the process as the signal asks, its cleanup done: the ``atexit`` callbacks run
        (a tracer's last spans, the log handlers), then the process ends without waiting for
        the interpreter's teardown (a worker thread still in a system call kept it alive, and
        the teardown alone took a second on a busy machine): killed by SIGTERM (the status a
        supervisor expects), or status 130 after SIGINT (the shell's, for Ctrl-C)."""
        self.phase = "running the exit callbacks"
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        if self.signum == signal.SIGTERM:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.raise_signal(signal.SIGTERM)
        os._exit(self.exit_status())
