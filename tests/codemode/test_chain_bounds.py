"""Code mode's records are bounded with the real sandbox: a script that floods refused calls has
them counted past ``max_audit_rows`` (one summary row names the bound), and a run's trace keeps
its last ``trace_limit`` records while ``ChainRunResult.trace_dropped`` counts the rest; and
how many scripts run at once is bounded, in all and per client."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import anyio
import pytest

from toolkeeper import ToolInvoker, tool
from toolkeeper.codemode import ToolChainTool
from toolkeeper.codemode import slots as chain_module
from toolkeeper.core.call import ToolCall
from toolkeeper.errors import PolicyViolationError
from toolkeeper.invoke import ChainPolicy
from toolkeeper.invoke.audit import SqliteAuditLog
from toolkeeper.toolbox import Toolbox

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


async def test_scripts_running_at_once_are_bounded_in_all_and_per_client_and_a_place_is_waited_for(
        monkeypatch: pytest.MonkeyPatch) -> None:
    entered: list[str] = []
    release = anyio.Event()

    @tool
    async def hold(who: str) -> str:
        """Wait until released."""
        entered.append(who)
        await release.wait()
        return who

    async def until(count: int) -> None:
        deadline = time.monotonic() + 60
        while len(entered) < count:
            assert time.monotonic() < deadline, entered
            await anyio.sleep(0.02)

    invoker = ToolInvoker([hold])
    chain = ToolChainTool(invoker, max_runs=3, max_runs_per_client=2)
    monkeypatch.setattr(chain_module, "SLOT_WAIT_S", 0.3)
    results: dict[str, object] = {}

    async def run(key: str, client: str) -> None:
        try:
            results[key] = (await chain.run_chain(f"result = hold(who={key!r}).text",
                                                  session_id=client)).value
        except PolicyViolationError as exc:
            results[key] = exc.message

    async with anyio.create_task_group() as group:
        group.start_soon(run, "a1", "client-a")
        group.start_soon(run, "a2", "client-a")
        await until(2)
        await run("a3", "client-a")  # its client holds two places: refused after the wait
        group.start_soon(run, "b1", "client-b")
        await until(3)
        await run("c1", "client-c")  # all three places are held
        # a run that waits long enough gets the place a run gives back
        monkeypatch.setattr(chain_module, "SLOT_WAIT_S", 60)
        group.start_soon(run, "c2", "client-c")
        await anyio.sleep(0.2)
        assert "c2" not in entered and chain.slots.running == 3
        release.set()
    assert results["a3"] == (
        "the script did not run: 2 scripts of this client are already running (the limit is "
        "2: [codemode] max_runs_per_client); wait for one to end, then call tool_chain again")
    assert results["c1"] == (
        "the script did not run: 3 scripts are already running (the limit: [codemode] "
        "max_runs); wait for one to end, then call tool_chain again")
    assert {k: results[k] for k in ("a1", "a2", "b1", "c2")} == {
        "a1": "a1", "a2": "a2", "b1": "b1", "c2": "c2"}
    assert sorted(entered) == ["a1", "a2", "b1", "c2"] and chain.slots.running == 0
    # through the door, the refusal is the model's error result, naming the limit
    box = Toolbox([hold])
    invoker = ToolInvoker(box)
    busy = ToolChainTool(invoker, max_runs=1)
    busy.slots._running = 1  # as if a run held the only place
    monkeypatch.setattr(chain_module, "SLOT_WAIT_S", 0.1)
    box.add(busy)
    async with invoker.open_session(session_id="client-d") as session:
        answer = await invoker.invoke(ToolCall(id="t", name="tool_chain",
                                               arguments={"code": "result = 1"}),
                                      session=session)
    assert answer.status == "denied" and answer.error_code == "policy_violation"
    assert "[codemode] max_runs" in answer.text
