"""The audit log's writes: a lone call's row committed on the event loop when that waits for
nothing, otherwise off the loop by one writer thread (never holding the loop while another
connection writes), many calls' rows in one transaction (a few INSERT statements), each call
answered once its row is committed, the write-ahead log checkpointed off the loop."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from toolkeeper import tool
from toolkeeper.approval.sqlite import Connection, Cursor, Database, Params
from toolkeeper.invoke import ChainPolicy, ToolInvoker
from toolkeeper.invoke.audit import CHECKPOINT_EVERY, ROWS_PER_INSERT, AuditEntry, SqliteAuditLog
from toolkeeper.invoke.gates import RecordGate
from toolkeeper.toolbox import Toolbox

from .helpers import call

pytestmark = pytest.mark.anyio


@tool
async def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


def _invoker(audit: SqliteAuditLog) -> ToolInvoker:
    return ToolInvoker(Toolbox([add]), audit=audit,
                       policy=ChainPolicy(max_tool_calls=10_000, total_timeout_s=600))


async def test_a_write_waiting_on_a_locked_file_does_not_hold_the_event_loop(
        tmp_path: Path) -> None:
    audit = SqliteAuditLog(tmp_path / "audit.db")
    other = sqlite3.connect(tmp_path / "audit.db", isolation_level=None,
                            check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # another process writing: the audit insert must wait
    releaser = threading.Timer(0.5, other.execute, ("COMMIT",))
    ticks: list[int] = []

    async def tick() -> None:
        while True:
            ticks.append(1)
            await anyio.sleep(0.01)

    inv = _invoker(audit)
    async with anyio.create_task_group() as group:
        group.start_soon(tick)
        await anyio.sleep(0.05)
        releaser.start()
        before = len(ticks)
        result = await inv.invoke(call("add", a=1, b=2), session=inv.open_session())
        during = len(ticks) - before
        group.cancel_scope.cancel()
    audit.close()
    assert result.ok and result.text == "3"
    assert during >= 10  # the loop kept turning while the row waited for the lock
    assert [e.tool for e in audit.query()] == ["add"]


async def test_concurrent_calls_are_all_recorded_and_close_writes_the_rest(
        tmp_path: Path) -> None:
    audit = SqliteAuditLog(tmp_path / "audit.db")
    inv = _invoker(audit)
    session = inv.open_session()
    results: list[int] = []

    async def one(n: int) -> None:
        result = await inv.invoke(call("add", a=n, b=1000), session=session)
        results.append(int(result.text))

    async with anyio.create_task_group() as group:
        for n in range(200):
            group.start_soon(one, n)
    audit.close()
    assert sorted(results) == [n + 1000 for n in range(200)]
    with sqlite3.connect(tmp_path / "audit.db") as db:
        (rows,) = db.execute("SELECT count(*) FROM audit WHERE status = 'ok'").fetchone()
    assert rows == 200
    after = await inv.invoke(call("add", a=1, b=1), session=session)  # closed: written directly
    assert after.ok and len(audit.query(limit=500)) == 201


class _Counted:
    """A transaction's connection that keeps the statements run on it."""

    def __init__(self, conn: Connection, statements: list[str]) -> None:
        self.conn, self.statements = conn, statements

    def execute(self, sql: str, params: Params = (), /) -> Cursor:
        self.statements.append(sql)
        return self.conn.execute(sql, params)


class _Counting:
    """The real SQLite file, counting the statements of its write transactions."""

    def __init__(self, db: Database) -> None:
        self.db, self.path, self.statements = db, db.path, list[str]()

    @contextmanager
    def transaction(self) -> Iterator[_Counted]:
        with self.db.transaction() as conn:
            yield _Counted(conn, self.statements)

    def query(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        return self.db.query(sql, params)


def _entry(n: int) -> AuditEntry:
    return AuditEntry(ts=1000.0 + n, call_id=f"c{n}", session_id=f"s{n % 3}", tool=f"t{n}",
                      args_digest=f"d{n}", arguments={"n": n, "secret": "sk-" + "a" * 40},
                      status="ok" if n % 2 else "error", error_code=None if n % 2 else f"e{n}",
                      duration_ms=n / 4, approval_id=f"a{n}", decision=f"by rule {n}",
                      approver=f"p{n}")


def test_a_batch_is_a_few_insert_statements_each_row_in_its_columns(tmp_path: Path) -> None:
    database = _Counting(SqliteAuditLog(tmp_path / "audit.db").db)
    audit = SqliteAuditLog(database)
    entries = [_entry(n) for n in range(2 * ROWS_PER_INSERT + 2)]
    audit.record_many(entries)
    inserts = [sql for sql in database.statements if sql.startswith("INSERT")]
    assert len(inserts) == 3  # not one statement (one hand-back of the GIL) per row
    stored = sorted(audit.query(limit=1000), key=lambda e: e.ts)
    expected = [replace(e, arguments={"n": e.arguments["n"], "secret": "[REDACTED]"})
                for e in entries]
    assert stored == expected


async def test_a_gate_given_another_log_writes_to_it(tmp_path: Path) -> None:
    first, second = SqliteAuditLog(tmp_path / "a.db"), SqliteAuditLog(tmp_path / "b.db")
    inv = _invoker(first)
    gate = next(g for g in inv.gates if isinstance(g, RecordGate))
    gate.audit = second  # the gate asks once whether a log writes off the loop, on each set
    result = await inv.invoke(call("add", a=2, b=3), session=inv.open_session())
    first.close()
    second.close()
    assert result.ok
    assert ([e.tool for e in first.query()], [e.tool for e in second.query()]) == ([], ["add"])


async def test_a_quiet_log_commits_a_calls_row_on_the_loop_without_its_writer_thread(
        tmp_path: Path) -> None:
    audit = SqliteAuditLog(tmp_path / "audit.db")
    inv = _invoker(audit)
    session = inv.open_session()
    for n in range(3):
        result = await inv.invoke(call("add", a=n, b=1), session=session)
        assert result.ok
        with sqlite3.connect(tmp_path / "audit.db") as db:  # committed: another reader sees it
            (rows,) = db.execute("SELECT count(*) FROM audit").fetchone()
        assert rows == n + 1
    assert audit._writer is None  # no hand-over to a thread and back for a lone call
    audit.close()


async def test_a_log_sharing_its_file_with_another_store_keeps_the_writer_thread(
        tmp_path: Path) -> None:
    shared = SqliteAuditLog(SqliteAuditLog(tmp_path / "audit.db").db)
    inv = _invoker(shared)
    assert (await inv.invoke(call("add", a=1, b=1), session=inv.open_session())).ok
    assert shared._writer is not None  # another store's transactions share the connection
    shared.close()
    assert [e.tool for e in shared.query()] == ["add"]


async def test_the_write_ahead_log_is_checkpointed_when_every_row_is_committed_on_the_loop(
        tmp_path: Path) -> None:
    audit = SqliteAuditLog(tmp_path / "audit.db")
    wal = tmp_path / "audit.db-wal"
    for n in range(4 * CHECKPOINT_EVERY):
        await audit.record_async(_entry(n))
    audit.close()  # the writer thread has done the checkpoints queued for it
    with sqlite3.connect(tmp_path / "audit.db") as db:
        _, frames, _ = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    # SQLite restarts the log from its start after a checkpoint: without one, 1,000 commits
    # of a few pages each would be thousands of frames
    assert frames < 2 * CHECKPOINT_EVERY * 4, (frames, wal.stat().st_size)
    assert len(audit.query(limit=10_000)) == 4 * CHECKPOINT_EVERY
