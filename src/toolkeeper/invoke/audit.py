"""The audit log: every invocation, in the same SQLite file as approvals by default."""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import anyio.to_thread

from ..approval.pg import is_url, open_database
from ..approval.sqlite import Database, SqliteFile, number, text_or_none
from ..approval.store import ApprovalStore, SqliteApprovalStore
from ..approval.where import store_options
from ..errors import StoreError
from ..guardrails.builtin import SecretRedactor

__all__ = ["AUDIT_BOUND", "AuditEntry", "AuditLog", "PostgresAuditLog", "SqliteAuditLog",
           "WritesAsync", "beside", "redact_arguments", "write_summary"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    call_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    arguments TEXT NOT NULL,
    status TEXT NOT NULL,
    error_code TEXT,
    duration_ms REAL NOT NULL,
    approval_id TEXT,
    decision TEXT,
    approver TEXT
);
CREATE INDEX IF NOT EXISTS audit_tool ON audit(tool, ts);
CREATE INDEX IF NOT EXISTS audit_session ON audit(session_id, ts);
"""
_SECRET = re.compile(SecretRedactor().pattern.pattern)
_MAX_VALUE = 500


@dataclass(frozen=True, kw_only=True, slots=True)
class AuditEntry:
    """One invocation as the audit log keeps it."""

    ts: float
    call_id: str
    session_id: str
    tool: str
    args_digest: str
    arguments: dict[str, object]
    status: str
    error_code: str | None
    duration_ms: float
    approval_id: str | None = None
    decision: str | None = None
    approver: str | None = None


def redact_arguments(value: object) -> object:
    """Arguments with secrets masked and long strings cut, for the audit log."""
    if isinstance(value, str):
        masked = _SECRET.sub("[REDACTED]", value)
        return masked if len(masked) <= _MAX_VALUE else masked[:_MAX_VALUE] + "…"
    if isinstance(value, dict):
        return {k: redact_arguments(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_arguments(v) for v in value]
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return value


@runtime_checkable
class AuditLog(Protocol):
    def record(self, entry: AuditEntry) -> None: ...
    def query(self, *, tool: str | None = None, status: str | None = None,
              session_id: str | None = None, limit: int = 100) -> list[AuditEntry]: ...


@runtime_checkable
class WritesAsync(Protocol):
    """An audit log the door can await without blocking the event loop (a writer thread)."""

    async def record_async(self, entry: AuditEntry) -> None: ...


AUDIT_BOUND = "audit_bound"
"""The error code of a session's summary row: refused calls counted past ``max_audit_rows``."""


async def write_summary(audit: AuditLog | None, session_id: str, dropped: int, limit: int
                        ) -> None:
    """One row for the ``dropped`` refused calls a session counted rather than stored: tool
    ``$audit``, status ``dropped``, error code ``audit_bound``, and in its arguments the bound
    that fired (``max_audit_rows``), its value and the count."""
    if audit is None:
        return
    entry = AuditEntry(
        ts=time.time(), call_id=f"{session_id}$audit", session_id=session_id, tool="$audit",
        args_digest="", arguments={"bound": "max_audit_rows", "limit": limit,
                                   "dropped": dropped},
        status="dropped", error_code=AUDIT_BOUND, duration_ms=0.0,
        decision=f"{dropped} refused call(s) past max_audit_rows ({limit}) counted, not stored")
    if isinstance(audit, WritesAsync):
        await audit.record_async(entry)
    else:
        audit.record(entry)


_COLUMNS = ("ts", "call_id", "session_id", "tool", "args_digest", "arguments", "status",
            "error_code", "duration_ms", "approval_id", "decision", "approver")
_INSERT = f"INSERT INTO audit ({', '.join(_COLUMNS)}) VALUES "
_VALUES = "(" + ", ".join("?" * len(_COLUMNS)) + ")"
ROWS_PER_INSERT = 64
"""Rows one INSERT statement carries (768 parameters, under SQLite's oldest limit of 999): a
batch is a few statements, not one per row, so the writer thread gives the GIL up and takes it
back (SQLite releases it around each statement) and, on PostgreSQL, waits for the server a few
times per batch, not once per row."""
MAX_BATCH = 256
"""Rows one transaction of the writer thread takes at most."""

Done = asyncio.Future[BaseException | None]
"""What a call waiting on the event loop for its row awaits: the write's error, or None."""
Waiter = Done | Callable[[BaseException | None], None]
"""Who is told a row's outcome: a future on an event loop, or a function (a thread waits)."""
CHECKPOINT_EVERY = 250
"""Commits between two checkpoints of a SQLite audit file's write-ahead log (about 1,000
pages, where SQLite would checkpoint by itself), made by the writer thread."""
_CHECKPOINT: list[tuple[AuditEntry, Waiter]] = []
"""Put on the writer's queue: checkpoint the log (the item itself is never written)."""


def _text(value: str | None) -> str | None:
    """``value`` as the database can hold it: a lone surrogate (which a client's JSON can
    send in a tool's name or a request's id) as its ``\\udXXX`` escape, where it would fail
    the row's write, and with it every call written in the same transaction."""
    if value is None or value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def _row(entry: AuditEntry) -> tuple[object, ...]:
    # Field by field: ``asdict`` would copy the arguments level by level (and overflow the
    # stack on a deep nesting) only for them to be replaced by their JSON.
    arguments = json.dumps(redact_arguments(entry.arguments), default=str, ensure_ascii=False)
    return (entry.ts, _text(entry.call_id), _text(entry.session_id), _text(entry.tool),
            entry.args_digest, _text(arguments), entry.status, _text(entry.error_code),
            entry.duration_ms, _text(entry.approval_id), _text(entry.decision),
            _text(entry.approver))


class SqliteAuditLog:
    """The audit table in a SQLite file (``toolkeeper.db`` by default, shared with approvals).

    ``record`` writes the row before it returns. ``record_async`` (what the invoker awaits)
    waits, without holding the event loop, until the row is committed. A lone call's row is
    committed on the loop itself when that waits for nothing (the turn recorded no other row,
    the file is the log's own, no row is queued for the writer thread, no connection is
    writing); other rows go to one writer thread — the rows of one turn of the loop together
    (one wake-up of the thread) — which commits the rows waiting when it is free in one
    transaction (another past ``MAX_BATCH``). So under load the file sees one write for many
    calls while the loop goes on with other requests, another process's transaction never
    holds the loop, and with PostgreSQL the round trip is off the loop too. On a file of its
    own the log is checkpointed by the writer thread every ``CHECKPOINT_EVERY`` commits, not
    by a commit on the loop. A call's answer waits for its row, so nothing answered is ever
    lost, not even to ``kill -9``: what a crash can lose is the batch in flight, calls not
    yet answered. A row that cannot be written fails its call (``StoreError``), as ``record``
    does. ``close`` writes what is queued and stops the thread."""

    def __init__(self, path: str | Path | Database) -> None:
        self.db = open_database(path, _SCHEMA, "audit")
        self._own_file = self.db if isinstance(self.db, SqliteFile) and self.db is not path \
            else None
        if self._own_file is not None:
            self._own_file.checkpoints_by_hand()
        self._commits = 0
        self._queue: queue.SimpleQueue[list[tuple[AuditEntry, Waiter]] | None] = \
            queue.SimpleQueue()
        self._gathered: dict[asyncio.AbstractEventLoop, list[tuple[AuditEntry, Waiter]]] = {}
        self._writer: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    def record(self, entry: AuditEntry) -> None:
        self.record_many([entry])

    def record_many(self, entries: list[AuditEntry]) -> None:
        """Write ``entries`` in one transaction, ``ROWS_PER_INSERT`` rows a statement."""
        rows = [_row(entry) for entry in entries]
        with self.db.transaction() as conn:
            for start in range(0, len(rows), ROWS_PER_INSERT):
                chunk = rows[start:start + ROWS_PER_INSERT]
                conn.execute(_INSERT + ", ".join([_VALUES] * len(chunk)),
                             [value for row in chunk for value in row])
        if self._own_file is not None:
            self._committed()

    async def record_async(self, entry: AuditEntry) -> None:
        """``record`` without blocking the event loop: returns once the row is committed (with
        whatever else the writer thread took in the same transaction)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # another event loop (trio): wait in a worker thread
            await anyio.to_thread.run_sync(self._enqueue_and_wait, entry)
            return
        done: asyncio.Future[BaseException | None] = loop.create_future()
        if not self._gather(loop, entry, done):
            await anyio.to_thread.run_sync(self.record, entry)
            return
        error = await done  # a caller cancelled meanwhile: its row is written all the same
        if error is not None:
            raise error

    def close(self) -> None:
        """Write every queued row, then stop the writer thread (``record`` still works)."""
        with self._lock:
            self._closed = True
            writer = self._writer
            if writer is not None:
                self._queue.put(None)
        if writer is not None:
            writer.join()

    def _gather(self, loop: asyncio.AbstractEventLoop, entry: AuditEntry, done: Waiter
                ) -> bool:
        """Queue ``entry`` with the rows other calls on ``loop`` record in the same turn of
        the loop: one hand-over (one wake-up of the writer) for all of them."""
        if self._closed:
            return False
        gathered = self._gathered.get(loop)
        if gathered is None:
            gathered = self._gathered[loop] = []
            loop.call_soon(self._hand_over, loop)
        gathered.append((entry, done))
        return True

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        gathered = self._gathered.pop(loop, [])
        if gathered and self._written_now(gathered):
            return
        if gathered and not self._enqueue(gathered):  # closed meanwhile: written here
            error: BaseException | None = None
            try:
                self.record_many([entry for entry, _ in gathered])
            except Exception as exc:
                error = exc
            _settle([done for _, done in gathered], error)

    def _written_now(self, gathered: list[tuple[AuditEntry, Waiter]]) -> bool:
        """Commit a lone call's row on the event loop itself when that waits for nothing:
        the turn recorded no other row, the file is this log's own, the writer thread has
        nothing queued and no connection is writing (a commit here takes tens of
        microseconds, less than handing the row to the thread and being woken back).
        Otherwise the writer thread takes the rows: under load the loop goes on with other
        requests while they are written (rows of many calls committed on the loop would
        hold all of them until the commit). A checkpoint of the log never runs here."""
        own = self._own_file
        if own is None or len(gathered) != 1 or not self._queue.empty():
            return False
        (entry, done), = gathered
        error: BaseException | None = None
        try:
            with own.transaction_now() as conn:
                if conn is None:
                    return False
                conn.execute(_INSERT + _VALUES, _row(entry))
        except Exception as exc:  # the call it belonged to fails (fail closed); its caller
            error = exc  # is told, whatever the error: it never waits on a row forever
        _settle([done], error)
        if error is None:
            self._committed()
        return True

    def _committed(self) -> None:
        self._commits += 1
        if self._commits >= CHECKPOINT_EVERY:
            self._commits = 0
            self._enqueue(_CHECKPOINT)

    def _enqueue(self, items: list[tuple[AuditEntry, Waiter]]) -> bool:
        """Queue rows, each with its waiter (an asyncio future, or a function) to be told the
        outcome."""
        with self._lock:
            if self._closed:
                return False
            if self._writer is None:
                self._writer = threading.Thread(target=self._write_batches, daemon=True,
                                                name="toolkeeper-audit-writer")
                self._writer.start()
            self._queue.put(items)
            return True

    def _enqueue_and_wait(self, entry: AuditEntry) -> None:
        written = threading.Event()
        errors: list[BaseException | None] = []

        def tell(error: BaseException | None) -> None:
            errors.append(error)
            written.set()

        if not self._enqueue([(entry, tell)]):
            self.record(entry)
            return
        written.wait()
        if errors[0] is not None:
            raise errors[0]

    def _write_batches(self) -> None:
        stop = False
        while not stop:
            batch = [self._queue.get()]
            size = len(batch[0] or ())
            while size < MAX_BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
                size += len(batch[-1] or ())
            stop = None in batch
            if self._own_file is not None and any(items is _CHECKPOINT for items in batch):
                with contextlib.suppress(StoreError):  # the next one tries again
                    self._own_file.checkpoint()
            waiting = [item for items in batch if items is not None for item in items]
            if not waiting:
                continue
            error: BaseException | None = None
            try:
                self.record_many([entry for entry, _ in waiting])
            except Exception as exc:  # each call it belonged to fails (fail closed)
                error = exc
            futures: dict[asyncio.AbstractEventLoop, list[Done]] = {}
            for _, waiter in waiting:
                if callable(waiter):
                    waiter(error)
                else:
                    futures.setdefault(waiter.get_loop(), []).append(waiter)
            for loop, waiters in futures.items():  # one wake-up per event loop and batch
                with contextlib.suppress(RuntimeError):  # its loop is gone: nobody waits
                    loop.call_soon_threadsafe(_settle, waiters, error)

    def query(self, *, tool: str | None = None, status: str | None = None,
              session_id: str | None = None, limit: int = 100) -> list[AuditEntry]:
        clauses, params = [], []
        for column, value in (("tool", tool), ("status", status), ("session_id", session_id)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self.db.query(
            "SELECT ts, call_id, session_id, tool, args_digest, arguments, status, error_code, "
            f"duration_ms, approval_id, decision, approver FROM audit {where} "
            "ORDER BY seq DESC LIMIT ?", (*params, limit))
        return [AuditEntry(ts=number(r[0]), call_id=str(r[1]), session_id=str(r[2]),
                           tool=str(r[3]), args_digest=str(r[4]), arguments=json.loads(str(r[5])),
                           status=str(r[6]), error_code=text_or_none(r[7]),
                           duration_ms=number(r[8]), approval_id=text_or_none(r[9]),
                           decision=text_or_none(r[10]), approver=text_or_none(r[11]))
                for r in rows]


def _settle(waiters: Sequence[Waiter], error: BaseException | None) -> None:
    for done in waiters:
        if callable(done):
            done(error)
        elif not done.done():
            done.set_result(error)


class PostgresAuditLog(SqliteAuditLog):
    """The audit table on PostgreSQL (``postgresql://…``), shared by every replica."""

    def __init__(self, url: str) -> None:
        if not is_url(url):
            raise StoreError(f"PostgresAuditLog needs a postgresql:// URL, got {url!r}")
        super().__init__(url)


def beside(store: ApprovalStore | None) -> SqliteAuditLog | None:
    """The audit log a persisted approval store keeps beside it: the same database (a SQLite
    file, as ``toolkeeper serve`` keeps both, or PostgreSQL), so ``toolkeeper audit`` with the
    options that reach the store shows the calls. ``None`` for a store in memory or one of
    another kind."""
    if not isinstance(store, SqliteApprovalStore) or store_options(store.db) is None:
        return None
    return SqliteAuditLog(store.db)
