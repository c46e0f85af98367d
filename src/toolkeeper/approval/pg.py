"""PostgreSQL for the stores, so several ``toolkeeper serve`` replicas share approvals, the audit
log, client tokens, page sessions and pinned fingerprints (install ``toolkeeper[postgres]``).

``PgDatabase`` has the same two methods as ``SqliteFile`` — ``transaction()`` and ``query()``
with ``?`` placeholders — so every store runs on either. Each store's schema is a versioned
migration, applied once under an advisory lock (replicas starting together do not race) and
recorded in ``toolkeeper_schema``. Changes to approvals are announced with ``NOTIFY`` (payload:
the request id only) so a waiting call on any replica wakes at once; it still re-reads the row,
so a lost notification only delays.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import StoreError
from ..extras import missing
from .sqlite import Cursor, Database, Params, SqliteFile

if TYPE_CHECKING:
    import psycopg

__all__ = ["CHANNEL", "PgDatabase", "is_url", "open_database"]

CHANNEL = "toolkeeper_approvals"
_POOLS: dict[str, PgDatabase] = {}
_LOCK = threading.Lock()
_CONNECT_TIMEOUT_S = 10
_TYPES = ((re.compile(r"INTEGER PRIMARY KEY AUTOINCREMENT", re.I), "BIGSERIAL PRIMARY KEY"),
          (re.compile(r"\bREAL\b", re.I), "DOUBLE PRECISION"),
          (re.compile(r"\bBLOB\b", re.I), "BYTEA"))


def is_url(target: object) -> bool:
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


def open_database(target: str | Path | Database, schema: str, name: str) -> Database:
    """A ``SqliteFile`` for a path, a shared ``PgDatabase`` for a ``postgresql://`` URL (with
    ``schema`` migrated as ``name``), or ``target`` itself when it already is a database."""
    if isinstance(target, Database):
        database = target
    elif is_url(target):
        with _LOCK:
            pool = _POOLS.get(str(target))
            if pool is None:
                pool = _POOLS[str(target)] = PgDatabase(str(target))
        database = pool
    else:
        return SqliteFile(str(target), schema)
    if isinstance(database, PgDatabase):
        database.migrate(name, schema)
    elif isinstance(database, SqliteFile):
        database.script(schema)
    return database


def _pg_sql(sql: str) -> str:
    return sql.replace("?", "%s")


class _Connection:
    """A connection inside a transaction, taking ``?`` placeholders."""

    def __init__(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Params = (), /) -> Cursor:
        named = isinstance(params, dict)  # :name → %(name)s, else ? → %s
        sql = re.sub(r":(\w+)", r"%(\1)s", sql) if named else _pg_sql(sql)
        return self.conn.execute(sql, params)


class PgDatabase:
    """A pool of connections to one PostgreSQL database."""

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 10) -> None:
        try:
            import psycopg
            import psycopg_pool
        except ImportError as exc:
            raise missing("postgres", "a postgresql:// store") from exc

        self.url = url
        self.path = _redacted(url)
        try:  # one connection first: a server that is not there fails now, in one line,
            # not after the pool has retried (and logged each retry) for its whole timeout
            psycopg.connect(url, connect_timeout=_CONNECT_TIMEOUT_S, autocommit=True).close()
            self.pool = psycopg_pool.ConnectionPool(url, min_size=min_size, max_size=max_size,
                                                    kwargs={"autocommit": True}, open=True,
                                                    timeout=30)
            self.pool.wait(timeout=30)
        except Exception as exc:
            reason = " ".join(str(exc).split())  # the driver's message spans lines
            raise StoreError(f"cannot connect to the PostgreSQL store at {self.path}: {reason}; "
                             "check the URL and that the server runs and accepts this user")\
                from exc
        self._migrated: set[tuple[str, str]] = set()

    @contextmanager
    def transaction(self) -> Iterator[_Connection]:
        import psycopg

        try:
            with self.pool.connection() as conn, conn.transaction():
                yield _Connection(conn)
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL store {self.path}: {exc}") from exc

    def query(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        import psycopg

        try:
            with self.pool.connection() as conn:
                return list(conn.execute(_pg_sql(sql), params).fetchall())
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL store {self.path}: {exc}") from exc

    def migrate(self, name: str, schema: str) -> None:
        """Apply ``schema`` (version = its digest) once per database, whoever starts first."""
        version = hashlib.sha256(schema.encode()).hexdigest()[:16]
        if (name, version) in self._migrated:
            return
        ddl = schema
        for pattern, replacement in _TYPES:
            ddl = pattern.sub(replacement, ddl)
        with self.transaction() as conn:
            conn.conn.execute("SELECT pg_advisory_xact_lock(7262348)")
            conn.conn.execute("CREATE TABLE IF NOT EXISTS toolkeeper_schema (name TEXT, "
                              "version TEXT, applied_at TIMESTAMPTZ DEFAULT now(), "
                              "PRIMARY KEY (name, version))")
            done = conn.conn.execute("SELECT 1 FROM toolkeeper_schema WHERE name = %s AND "
                                     "version = %s", (name, version)).fetchall()
            if not done:
                conn.conn.execute(ddl)
                conn.conn.execute("INSERT INTO toolkeeper_schema (name, version) VALUES "
                                  "(%s, %s)", (name, version))
        self._migrated.add((name, version))

    def notify(self, conn: _Connection, payload: str) -> None:
        conn.conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))

    def wait_for_notify(self, timeout: float) -> bool:
        """Block until a change is announced on ``CHANNEL`` or ``timeout`` passes."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"LISTEN {CHANNEL}")
            for _ in conn.notifies(timeout=timeout, stop_after=1):
                return True
        return False

    def close(self) -> None:
        self.pool.close()


def _redacted(url: str) -> str:
    """The URL without its password (for messages)."""
    return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", url)
