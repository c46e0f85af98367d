"""The first instant of a toolkeeper command: Ctrl-C held until the command can take it.

Python's own SIGINT handler raises ``KeyboardInterrupt`` wherever the interpreter happens to
be, and while modules are being imported that is often inside a callback whose exception
Python prints as "Exception ignored" and drops (the import system's module-lock callbacks, a
finalizer). A Ctrl-C in the first few hundred milliseconds of ``toolkeeper serve`` was lost
that way: the server started and served on. So when this package is being imported to run one
of its own commands — ``python -m toolkeeper.cli …`` (what ``toolkeeper install`` writes into a
desktop client's configuration), ``python -m toolkeeper``, or the ``toolkeeper`` script — a
SIGINT is only recorded until the command takes the signal (``take``): the command line ends
with status 130, ``serve`` starts its stop.

Importing toolkeeper as a library changes nothing: the handler is set only in those processes.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

__all__ = ["hold_interrupts", "take"]

_held: list[int] = []
_holding = False


def _record(signum: int, _frame: FrameType | None) -> None:
    _held.append(signum)


def _a_command() -> bool:
    """Whether this process imports toolkeeper to run one of its commands: Python names the
    program ``-m`` while it imports the packages of a ``-m`` module (only toolkeeper's own,
    since this runs while toolkeeper is imported), or the program is the ``toolkeeper`` script."""
    program = sys.argv[0] if sys.argv else ""
    return program == "-m" or os.path.basename(program) in ("toolkeeper", "toolkeeper.exe")


def hold_interrupts() -> None:
    """Record SIGINT instead of raising it, if this process is a toolkeeper command and
    SIGINT still has Python's handler (an ignored signal stays ignored)."""
    global _holding
    if not _a_command() or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return
    try:
        signal.signal(signal.SIGINT, _record)
    except ValueError:  # not the main thread: nothing to hold
        return
    _holding = True


def take() -> int | None:
    """Hand SIGINT back to Python's handler; the SIGINT that came while it was held, if any."""
    global _holding
    if _holding:
        _holding = False
        if signal.getsignal(signal.SIGINT) is _record:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    return _held[0] if _held else None


hold_interrupts()
