"""Where a person decides a stored request from a terminal: the ``toolkeeper approvals`` and
``toolkeeper audit`` options that reach one store, and where ``toolkeeper serve`` keeps its
state when told nothing.

A waiting call's message names the exact command (``toolkeeper approvals decide ID approve
--state-dir DIR``): a person who copies it reaches the store the agent used, not the default
one, which may not exist or may be another server's.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from .pg import PgDatabase, is_url
from .sqlite import Database

__all__ = ["DB_NAME", "decide_command", "default_state_dir", "store_options"]

DB_NAME = "toolkeeper.db"
"""The database's name in a state directory (approvals, audit, tokens)."""


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/toolkeeper``, else ``~/.local/state/toolkeeper``."""
    base = os.environ.get("XDG_STATE_HOME", "").strip()
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".local" / "state"
    return root / "toolkeeper"


def store_options(database: Database) -> str | None:
    """The command-line options that name ``database`` for ``toolkeeper approvals`` and
    ``toolkeeper audit``: ``""`` for the default state dir's, ``--state-dir DIR`` for another
    state dir's, ``--db FILE`` for a SQLite file of another name, ``--store URL`` (without its
    password) for PostgreSQL; ``None`` for an in-memory database, which no command reaches."""
    path = database.path
    if isinstance(database, PgDatabase) or is_url(path):
        return f"--store {shlex.quote(path)}"
    if path in ("", ":memory:") or path.startswith("file::memory:"):
        return None
    file = Path(path).absolute()
    if file.name != DB_NAME:
        return f"--db {shlex.quote(str(file))}"
    if file.parent == default_state_dir().absolute():
        return ""
    return f"--state-dir {shlex.quote(str(file.parent))}"


def decide_command(request_id: str, database: Database | None) -> str:
    """What a person runs to approve ``request_id`` kept in ``database`` (``None``: a store
    that is not a database of ours, reached as the default one)."""
    options = store_options(database) if database is not None else ""
    if options is None:
        return (f"approve request {request_id} in this process's approval store: it is in "
                "memory, no command reaches it")
    return f"toolkeeper approvals decide {request_id} approve {options}".rstrip()
