"""One SQLite file for approvals and the audit log: connection settings shared by both."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Protocol, runtime_checkable

from ..errors import StoreError

__all__ = ["Connection", "Cursor", "Database", "SqliteFile", "number", "text_or_none"]

Params = Sequence[object] | Mapping[str, object]


class Cursor(Protocol):
    """What a store reads of an executed statement."""

    @property
    def rowcount(self) -> int: ...
    def fetchone(self) -> tuple[object, ...] | None: ...
    def fetchall(self) -> list[tuple[object, ...]]: ...


class Connection(Protocol):
    """A connection inside a transaction: statements with ``?`` (or ``:name``) placeholders."""

    def execute(self, sql: str, params: Params = ..., /) -> Cursor: ...


@runtime_checkable
class Database(Protocol):
    """What every store runs on: ``SqliteFile`` or ``PgDatabase`` (or a database of the
    caller's that has the same two methods)."""

    path: str
    """Where it is, for messages (a URL without its password)."""
    def transaction(self) -> AbstractContextManager[Connection]: ...
    def query(self, sql: str, params: tuple[object, ...] = ...) -> list[tuple[object, ...]]: ...


def _create_private(path: Path) -> None:
    """Make the file owner-only before SQLite opens it (its -wal and -shm files copy the
    database's mode): it holds approvals, the audit log and token digests."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
    except FileExistsError:
        return
    os.close(fd)


def number(cell: object) -> float:
    """A number read back from a row (SQLite and PostgreSQL give ints, floats or decimals)."""
    return float(cell) if isinstance(cell, int | float) else float(str(cell))


def text_or_none(cell: object) -> str | None:
    """A nullable text column read back from a row."""
    return None if cell is None else str(cell)


class SqliteFile:
    """A WAL-mode SQLite file used from several threads through one serialized connection."""

    def __init__(self, path: str | Path, schema: str) -> None:
        self.path = str(path)
        self._lock = threading.RLock()
        try:
            if self.path != ":memory:":
                _create_private(Path(self.path))
            self._conn = sqlite3.connect(self.path, timeout=10.0, isolation_level=None,
                                         check_same_thread=False)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA busy_timeout=10000")
            self._conn.executescript(schema)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open the SQLite store at {self.path}: {exc}") from exc

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (BEGIN IMMEDIATE), serialized with other writers of the file."""
        with self._lock, self._errors():
            self._conn.execute("BEGIN IMMEDIATE")
            with self._begun() as conn:
                yield conn

    @contextmanager
    def transaction_now(self) -> Iterator[sqlite3.Connection | None]:
        """A write transaction only if it begins without waiting — no other thread is using
        this connection and no other connection holds the file's write lock — else ``None``
        at once (the caller writes another way). What the event loop may use: it never
        waits for another process's transaction."""
        if not self._lock.acquire(blocking=False):
            yield None
            return
        try:
            with self._errors():
                if not self._begin_now():
                    yield None
                    return
                with self._begun() as conn:
                    yield conn
        finally:
            self._lock.release()

    @contextmanager
    def _begun(self) -> Iterator[sqlite3.Connection]:
        """The transaction just begun: committed as the block ends, rolled back if it fails."""
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """SQLite's errors as the store's, naming the file."""
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite store {self.path}: {exc}") from exc

    def _begin_now(self) -> bool:
        self._conn.execute("PRAGMA busy_timeout=0")
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:  # another connection is writing
            return False
        finally:
            self._conn.execute("PRAGMA busy_timeout=10000")
        return True

    def checkpoints_by_hand(self) -> None:
        """Stop commits on this connection from checkpointing the write-ahead log (SQLite
        does it in the commit that passes 1,000 pages, with an fsync): its owner calls
        ``checkpoint`` where a pause does not matter."""
        with self._lock:
            self._conn.execute("PRAGMA wal_autocheckpoint=0")

    def checkpoint(self) -> None:
        """Copy what the write-ahead log holds into the file as far as readers allow
        (SQLite's passive checkpoint: it waits for nobody)."""
        with self._lock:
            try:
                self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite store {self.path}: {exc}") from exc

    def query(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite store {self.path}: {exc}") from exc

    def script(self, schema: str) -> None:
        """Create what ``schema`` creates (``IF NOT EXISTS`` statements)."""
        with self._lock:
            try:
                self._conn.executescript(schema)
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite store {self.path}: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            self._conn.close()
