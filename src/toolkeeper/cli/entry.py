"""The ``toolkeeper`` console script: the command when the ``cli`` extra is installed, else one
line saying how to install it (not a traceback). Ctrl-C while the command is still loading ends
it as Ctrl-C does (status 130), without a traceback either."""

from __future__ import annotations

import sys
from collections.abc import Callable

from ..extras import EXTRAS, MissingExtraError, missing
from ..startup import take

try:
    from .main import main as _main
except ModuleNotFoundError as exc:  # typer or rich missing: the command cannot be built
    if exc.name is None or exc.name.split(".")[0] not in EXTRAS["cli"]:
        raise
    _run: Callable[[], None] | None = None
except KeyboardInterrupt:
    raise SystemExit(130) from None
else:
    _run = _main

__all__ = ["main"]


def main() -> None:
    """Run the command; a part it needs that is not installed is named in one line with the
    extra that brings it (exit status 2); Ctrl-C ends it with status 130, quietly."""
    try:
        if take() is not None:  # a Ctrl-C while the command loaded, held until now
            raise KeyboardInterrupt
        if _run is None:
            raise missing("cli", "the toolkeeper command")
        _run()
    except MissingExtraError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except KeyboardInterrupt:  # Ctrl-C before a command took it (building the command line)
        raise SystemExit(130) from None
