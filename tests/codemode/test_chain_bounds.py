"""Code mode's records are bounded with the real sandbox: a script that floods refused calls has
them counted past ``max_audit_rows`` (one summary row names the bound), and a run's trace keeps
its last ``trace_limit`` records while ``ChainRunResult.trace_dropped`` counts the rest."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from toolkeeper import ToolInvoker, tool
from toolkeeper.codemode import ToolChainTool
from toolkeeper.invoke import ChainPolicy
from toolkeeper.invoke.audit import SqliteAuditLog

pytestmark = pytest.mark.anyio

FLOOD = """
for n in range(30):
    try:
        call_tool('screenshot', {'width': n})
    except Exception:
        pass
result = int(word_count(text='a b c').text)
"""


@tool
def word_count(text: str) -> int:
    """Count words."""
    return len(text.split())


@tool
def screenshot(width: int) -> str:
    """A picture of the screen (never callable from the script here)."""
    return "png" * width


async def test_a_script_flooding_refused_calls_gets_them_counted_past_max_audit_rows(
        tmp_path: Path) -> None:
    audit = SqliteAuditLog(tmp_path / "audit.db")
    invoker = ToolInvoker([word_count, screenshot], audit=audit)
    chain = ToolChainTool(invoker, tools=["word_count"],
                          policy=ChainPolicy(max_tool_calls=100, max_audit_rows=5))
    run = await chain.run_chain(FLOOD)
    audit.close()
    assert run.value == 3 and run.audit_dropped == 25
    with sqlite3.connect(tmp_path / "audit.db") as db:
        rows = list(db.execute("SELECT tool, status, error_code, arguments FROM audit "
                               "ORDER BY seq"))
    assert [r[:3] for r in rows[:5]] == [("screenshot", "denied", "policy_violation")] * 5
    assert rows[5][:3] == ("word_count", "ok", None)  # a call that runs is always stored
    (summary,) = rows[6:]
    assert summary[:3] == ("$audit", "dropped", "audit_bound")
    assert json.loads(summary[3]) == {"bound": "max_audit_rows", "limit": 5, "dropped": 25}
    assert len(run.call_trace) == 31  # the trace still has every call (within trace_limit)


async def test_a_runs_trace_keeps_its_last_records_and_counts_the_rest() -> None:
    invoker = ToolInvoker([word_count, screenshot])
    chain = ToolChainTool(invoker, tools=["word_count"], policy=ChainPolicy(max_tool_calls=100),
                          trace_limit=10)
    run = await chain.run_chain(FLOOD)
    assert run.value == 3
    assert len(run.call_trace) == 10 and run.trace_dropped == 21
    assert run.call_trace[-1].tool == "word_count"
