"""Audit records every invocation; a thousand concurrent calls lose and duplicate nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from toolkeeper import tool
from toolkeeper.invoke import ChainPolicy, ToolInvoker
from toolkeeper.invoke.audit import SqliteAuditLog
from toolkeeper.toolbox import Toolbox

from .helpers import call

pytestmark = pytest.mark.anyio
SEEN: list[int] = []


@tool(inline=True)
def record(n: int) -> int:
    """Remember n."""
    SEEN.append(n)
    return n


@tool(is_concurrency_safe=False)
def exclusive(n: int) -> int:
    """Not safe to run twice at once."""
    SEEN.append(n)
    return n


async def test_every_invocation_is_audited_with_redacted_arguments(tmp_path: Path) -> None:
    audit = SqliteAuditLog(tmp_path / "toolkeeper.db")
    inv = ToolInvoker(Toolbox([record]), audit=audit)
    async with inv.open_session() as session:
        await inv.invoke(call("record", n=1), session=session)
        await inv.invoke(call("record", n="x"), session=session)
        await inv.invoke(call("missing", key="sk-ant-abcdefghijklmnopqrstuvwxyz"), session=session)
    entries = SqliteAuditLog(tmp_path / "toolkeeper.db").query()
    assert [(e.tool, e.status, e.error_code) for e in entries] == [
        ("missing", "error", "unknown_tool"), ("record", "error", "invalid_arguments"),
        ("record", "ok", None)]
    assert entries[0].arguments == {"key": "[REDACTED]"}
    assert {e.session_id for e in entries} == {session.id}
    assert [e.tool for e in audit.query(status="ok")] == ["record"]


async def test_a_thousand_concurrent_invocations(tmp_path: Path) -> None:
    SEEN.clear()
    inv = ToolInvoker(Toolbox([record]), policy=ChainPolicy(max_tool_calls=5000),
                      audit=SqliteAuditLog(tmp_path / "load.db"))
    results: list[Any] = [None] * 1000
    async with inv.open_session() as session:
        async def one(i: int) -> None:
            results[i] = await inv.invoke(call("record", n=i), session=session)

        async with anyio.create_task_group() as group:
            for i in range(1000):
                group.start_soon(one, i)
    assert sorted(SEEN) == list(range(1000))
    assert [r.text for r in results] == [str(i) for i in range(1000)]
    assert len(session.trace) == 1000 and session.call_count == 1000
    assert len({r.call_id for r in session.trace}) == 1000
    assert len(SqliteAuditLog(tmp_path / "load.db").query(limit=5000)) == 1000


async def test_invoke_many_keeps_order_and_serializes_unsafe_tools() -> None:
    SEEN.clear()
    inv = ToolInvoker(Toolbox([record, exclusive]))
    calls = [call("exclusive" if i % 2 else "record", n=i) for i in range(10)]
    calls.insert(3, call("nope"))
    async with inv.open_session() as session:
        results = await inv.invoke_many(calls, session=session)
    assert [r.call_id for r in results] == [c.id for c in calls]
    assert results[3].error_code == "unknown_tool"
    assert sorted(SEEN) == list(range(10))
