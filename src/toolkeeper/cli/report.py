"""How the command reports to a person: one line per error on stderr, the traceback only when
``--debug`` asked for it."""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from .state import default_state_dir

__all__ = ["Db", "StateDir", "Store", "err", "fail", "is_debug", "kept", "out", "set_debug",
           "state_dir_of", "store_target"]

Store = Annotated[str | None, typer.Option(
    "--store", help="The server's shared store (postgresql://…); default: SQLite in --state-dir.")]

Db = Annotated[Path | None, typer.Option(
    "--db", help="A SQLite file to use instead of STATE_DIR/toolkeeper.db (an agent's own "
    "store: its waiting message names it).", show_default=False)]

StateDir = Annotated[Path | None, typer.Option(
    help="The state directory of toolkeeper serve; default: serve's, $XDG_STATE_HOME/toolkeeper "
         "else ~/.local/state/toolkeeper.", show_default=False)]

out = Console()
err = Console(stderr=True)
_debug = False


def set_debug(enabled: bool) -> None:
    """Show tracebacks of the errors reported from now on (``toolkeeper --debug ...``)."""
    global _debug
    _debug = enabled


def is_debug() -> bool:
    """Whether ``--debug`` asked for tracebacks."""
    return _debug


def fail(error: BaseException | str) -> typer.Exit:
    """Print ``error:`` and one line; returns the exit (code 2) for the caller to raise."""
    cause = error.__cause__ if isinstance(error, BaseException) else None
    hint = ("" if _debug or cause is None or isinstance(cause, ImportError | SyntaxError)
            else " [dim](--debug shows the traceback)[/]")
    err.print(f"[bold red]error:[/] {escape(str(error))}{hint}", soft_wrap=True)
    if _debug and cause is not None:
        err.print("".join(traceback.format_exception(cause)), markup=False, highlight=False)
    return typer.Exit(code=2)


def in_range(option: str, value: float, low: float, high: float, what: str) -> None:
    """Refuse a number outside ``low``..``high`` in one line naming the option and the range."""
    if not low <= value <= high:
        raise fail(f"{option} must be {what} from {low:g} to {high:g} (got {value:g})")


def state_dir_of(given: Path | None) -> Path:
    """``--state-dir`` as given, else where ``toolkeeper serve`` keeps its state by default."""
    return given if given is not None else default_state_dir()


def kept(state_dir: Path, *, nothing: str, to: Console = out) -> bool:
    """Whether ``toolkeeper serve`` has kept state in ``state_dir``. When it has not (a fresh
    machine, before the first ``serve``: not an error), one line on ``to`` says ``nothing``
    and where serve would keep it."""
    db = state_dir / "toolkeeper.db"
    if db.exists():
        return True
    to.print(f"{nothing}: toolkeeper serve keeps its state in {db}, which does not exist yet "
             "(--state-dir or --store reads another server's)", markup=False, highlight=False,
             soft_wrap=True)
    return False


def store_target(store: str | None, state_dir: Path, *, create: bool = True,
                 db: Path | None = None) -> str | Path:
    """Where the state lives: a ``postgresql://`` URL, else the SQLite file ``db`` (which must
    exist), else ``toolkeeper.db`` in ``state_dir`` (made, owner-only, when missing and
    ``create``; else a missing file is an error)."""
    if db is not None and not store:
        if not db.is_file():
            raise fail(f"no database at {db}; pass the --db file, or the --state-dir (or "
                       "--store) toolkeeper serve uses")
        return db
    if store:
        if not store.startswith(("postgresql://", "postgres://")):
            raise fail(f"--store must be a postgresql:// URL, got {store!r} (SQLite lives in "
                       "--state-dir)")
        return store
    db = state_dir / "toolkeeper.db"
    if not create:
        if not db.exists():
            raise fail(f"no state at {db}; pass the --state-dir (or --store) toolkeeper serve "
                       "uses")
        return db
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    return db
