"""How the command reports to a person: one line per error on stderr, the traceback only when
``--debug`` asked for it."""

from __future__ import annotations

import traceback

import typer
from rich.console import Console
from rich.markup import escape

__all__ = ["err", "fail", "out", "set_debug"]

out = Console()
err = Console(stderr=True)
_debug = False


def set_debug(enabled: bool) -> None:
    """Show tracebacks of the errors reported from now on (``toolkeeper --debug ...``)."""
    global _debug
    _debug = enabled


def fail(error: BaseException | str) -> typer.Exit:
    """Print ``error:`` and one line; returns the exit (code 2) for the caller to raise."""
    cause = error.__cause__ if isinstance(error, BaseException) else None
    hint = ("" if _debug or cause is None or isinstance(cause, ImportError | SyntaxError)
            else " [dim](--debug shows the traceback)[/]")
    err.print(f"[bold red]error:[/] {escape(str(error))}{hint}", soft_wrap=True)
    if _debug and cause is not None:
        err.print("".join(traceback.format_exception(cause)), markup=False, highlight=False)
    return typer.Exit(code=2)
