"""``SqlBlobStore``: artifacts in a database table, so every ``toolkeeper serve`` replica on one
PostgreSQL store reads what another stored (SQLite works too, for one machine).

Content-addressed as the other stores (a ref is ``sha256:<hex>`` of the bytes); a blob larger
than ``max_bytes`` is refused; pins are rows (``ref``, holder, owner, when), so a pin made by
one replica keeps the blob from every replica's ``gc``, and ``pinned_by`` tells a replica which
refs a holder's sessions on any replica keep.

The store runs on any ``database`` with ``transaction()`` and ``query()`` taking ``?``
placeholders whose ``SCHEMA`` was applied (``toolkeeper serve`` opens it with the approval
store's ``open_database``: a pool, the schema migrated once under a lock).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from ..errors import StoreError
from .store import Blob, UnknownArtifactError, content_ref, holder_of, key_of

__all__ = ["DEFAULT_MAX_BYTES", "SCHEMA", "SqlBlobStore"]

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
"""The largest blob a table holds by default (64 MiB): a result above it is refused."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS toolkeeper_artifacts (
    ref TEXT PRIMARY KEY, data BLOB NOT NULL, media_type TEXT NOT NULL, name TEXT,
    created_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS toolkeeper_artifacts_created ON toolkeeper_artifacts (created_at);
CREATE TABLE IF NOT EXISTS toolkeeper_artifact_pins (
    ref TEXT NOT NULL, holder TEXT NOT NULL, owner TEXT NOT NULL, pinned_at REAL NOT NULL,
    PRIMARY KEY (ref, owner));
CREATE INDEX IF NOT EXISTS toolkeeper_artifact_pins_holder ON toolkeeper_artifact_pins (holder);
"""


class _Cursor(Protocol):
    def fetchall(self) -> list[tuple[object, ...]]: ...


class _Connection(Protocol):
    def execute(self, sql: str, params: Sequence[object] = ..., /) -> _Cursor: ...


class _Database(Protocol):
    """What the store needs of a database (the approval stores' ``SqliteFile`` and
    ``PgDatabase`` have it)."""

    path: str

    def transaction(self) -> AbstractContextManager[_Connection]: ...
    def query(self, sql: str, params: tuple[object, ...] = ...) -> list[tuple[object, ...]]: ...


class SqlBlobStore:
    """Blobs as rows of ``toolkeeper_artifacts``, pins as rows of ``toolkeeper_artifact_pins``."""

    def __init__(self, database: _Database, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.database = database
        self.max_bytes = max_bytes

    def put(self, data: bytes, media_type: str, *, name: str | None = None) -> str:
        if len(data) > self.max_bytes:
            raise StoreError(f"a result of {len(data)} bytes is over the artifact store's cap "
                             f"of {self.max_bytes} bytes; return less, or raise the cap "
                             "(SqlBlobStore(max_bytes=…))")
        ref = content_ref(data)
        with self.database.transaction() as conn:  # stored again: its TTL starts again
            conn.execute("INSERT INTO toolkeeper_artifacts (ref, data, media_type, name, "
                         "created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (ref) DO UPDATE SET "
                         "created_at = excluded.created_at",
                         (ref, bytes(data), media_type, name, time.time()))
        return ref

    def stat(self, ref: str) -> Blob | None:
        rows = self.database.query("SELECT data, media_type, name, created_at FROM "
                                   "toolkeeper_artifacts WHERE ref = ?", (ref,))
        if not rows:
            return None
        data, media_type, name, created_at = rows[0]
        return Blob(ref=ref, data=_bytes(data), media_type=str(media_type),
                    name=None if name is None else str(name), created_at=float(str(created_at)))

    def resolve(self, ref: str) -> Blob:
        blob = self.stat(ref)
        if blob is None:
            raise UnknownArtifactError(ref)
        return blob

    def pin(self, ref: str, owner: str) -> None:
        with self.database.transaction() as conn:
            conn.execute("INSERT INTO toolkeeper_artifact_pins (ref, holder, owner, pinned_at) "
                         "VALUES (?, ?, ?, ?) ON CONFLICT (ref, owner) DO UPDATE SET "
                         "pinned_at = excluded.pinned_at",
                         (ref, key_of(holder_of(owner)), key_of(owner), time.time()))

    def unpin(self, ref: str, owner: str) -> None:
        with self.database.transaction() as conn:
            conn.execute("DELETE FROM toolkeeper_artifact_pins WHERE ref = ? AND owner = ?",
                         (ref, key_of(owner)))

    def pinned_by(self, holder: str) -> list[str]:
        rows = self.database.query("SELECT DISTINCT ref FROM toolkeeper_artifact_pins WHERE "
                                   "holder = ?", (key_of(holder),))
        return sorted(str(row[0]) for row in rows)

    def drop_pins(self, older_than_s: float) -> int:
        with self.database.transaction() as conn:
            rows = conn.execute("DELETE FROM toolkeeper_artifact_pins WHERE pinned_at < ? "
                                "RETURNING ref", (time.time() - older_than_s,)).fetchall()
        return len(rows)

    def gc(self, ttl_s: float) -> int:
        with self.database.transaction() as conn:
            rows = conn.execute(
                "DELETE FROM toolkeeper_artifacts WHERE created_at < ? AND NOT EXISTS (SELECT 1 "
                "FROM toolkeeper_artifact_pins p WHERE p.ref = toolkeeper_artifacts.ref) "
                "RETURNING ref", (time.time() - ttl_s,)).fetchall()
        return len(rows)


def _bytes(cell: object) -> bytes:
    """A blob column read back (``bytes`` from SQLite and psycopg, a view from others)."""
    if isinstance(cell, bytes | bytearray | memoryview):
        return bytes(cell)
    raise StoreError(f"the artifact store's data column holds {type(cell).__name__}, not bytes")
