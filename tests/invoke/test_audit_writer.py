"""The audit log's writer thread: an invoker's audit rows are written off the event loop, many
calls' rows in one transaction, each call answered once its row is committed."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import anyio
import pytest

from toolkeeper import tool
from toolkeeper.invoke import ChainPolicy, ToolInvoker
from toolkeeper.invoke.audit import SqliteAuditLog
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
