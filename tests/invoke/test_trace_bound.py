"""A session's in-memory trace is bounded: a long run (a flood of calls, refused or not) keeps
the last ``trace_limit`` records, counts those it let go, and the audit log still has every
call."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper import tool
from toolkeeper.errors import UsageError
from toolkeeper.invoke import ChainPolicy, ToolCall, ToolInvoker
from toolkeeper.invoke.audit import SqliteAuditLog
from toolkeeper.invoke.session import DEFAULT_TRACE_LIMIT
from toolkeeper.toolbox import Toolbox

pytestmark = pytest.mark.anyio


@tool(inline=True)
def echo(n: int) -> int:
    """Give the number back."""
    return n


async def test_a_flood_of_refused_calls_keeps_only_the_last_records() -> None:
    invoker = ToolInvoker(Toolbox([echo]), policy=ChainPolicy(max_tool_calls=0))
    calls = DEFAULT_TRACE_LIMIT + 25
    async with invoker.open_session() as session:  # the default bound
        for i in range(calls):
            result = await invoker.invoke(ToolCall(id=f"c{i}", name="echo", arguments={"n": i}),
                                          session=session)
            assert result.error_code == "budget_exceeded"
        trace = session.trace
    assert session.trace_limit == DEFAULT_TRACE_LIMIT
    assert len(trace) == DEFAULT_TRACE_LIMIT and session.trace_dropped == 25
    assert trace[0].call_id == "c25" and trace[-1].call_id == f"c{calls - 1}"


async def test_the_bound_is_the_sessions_and_the_audit_keeps_every_call(tmp_path: Path) -> None:
    audit = SqliteAuditLog(tmp_path / "toolkeeper.db")
    invoker = ToolInvoker(Toolbox([echo]), audit=audit)
    async with invoker.open_session(trace_limit=3) as session:
        for i in range(5):
            await invoker.invoke(ToolCall(id=f"c{i}", name="echo", arguments={"n": i}),
                                 session=session)
    audit.close()
    assert [r.call_id for r in session.trace] == ["c2", "c3", "c4"]
    assert (session.trace_limit, session.trace_dropped) == (3, 2)
    assert len(audit.query(limit=100)) == 5


def test_a_trace_limit_below_one_is_refused() -> None:
    invoker = ToolInvoker(Toolbox([echo]))
    with pytest.raises(UsageError, match="trace_limit must be at least 1"):
        invoker.open_session(trace_limit=0)
