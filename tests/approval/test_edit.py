"""Edit, then approve: a person approves a call with other arguments than the asked ones. The
call runs once, with the edited arguments; the model is told which changed; the audit row keeps
the asked digest and names the one that ran; the same call made again is told that run's
result instead of running twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper import tool
from toolkeeper.approval import ApprovalDecision, PersistedApprovalHandler, SqliteApprovalStore
from toolkeeper.approval.models import args_digest, changed
from toolkeeper.invoke import ChainPolicy, ToolInvoker
from toolkeeper.invoke.audit import SqliteAuditLog
from toolkeeper.toolbox import Toolbox

from ..invoke.helpers import call

pytestmark = pytest.mark.anyio
RAN: list[tuple[int, str]] = []


@tool(risk="critical")
def wire_money(amount: int, to: str) -> str:
    """Send money."""
    RAN.append((amount, to))
    return f"sent {amount} to {to}"


def _door(tmp_path: Path) -> tuple[ToolInvoker, SqliteApprovalStore]:
    store = SqliteApprovalStore(tmp_path / "a.db")
    policy = ChainPolicy(approval_timeout_s=0.05, approval_ttl_s=600, call_timeout_s=5)
    door = ToolInvoker(Toolbox([wire_money]), PersistedApprovalHandler(store, wait_s=0.05,
                                                                        poll_s=0.01),
                       policy=policy, audit=SqliteAuditLog(store.db))
    return door, store


async def test_an_edited_approval_runs_the_edited_arguments_once_and_tells_the_model(
        tmp_path: Path) -> None:
    RAN.clear()
    door, store = _door(tmp_path)
    asked = {"amount": 5000, "to": "mallory"}
    async with door.open_session() as session:
        first = await door.invoke(call("wire_money", **asked), session=session)
        assert first.status == "pending", first.text
        (request,) = store.pending()
        edited = {"amount": 50, "to": "alice"}
        assert store.decide(ApprovalDecision(request_id=request.id, outcome="approved",
                                             approver="web:operator", arguments=edited))
        ran = await door.invoke(call("wire_money", **asked), session=session)
        again = await door.invoke(call("wire_money", **asked), session=session)
    assert RAN == [(50, "alice")]
    assert ran.status == "ok" and "sent 50 to alice" in ran.text
    assert "a person edited the arguments" in ran.text and "Changed: amount, to" in ran.text
    assert again.status == "ok" and not again.ran and "sent 50 to alice" in again.text
    rows = [r for r in SqliteAuditLog(store.db).query() if r.decision != "told again: the "
            "approved run's result; nothing ran" and r.status == "ok"]
    (row,) = rows
    assert row.args_digest == args_digest(asked)  # the row is the asked call's
    assert row.decision == (f"approved with edited arguments (ran {args_digest(edited)}; "
                            "changed: amount, to)")


async def test_resume_runs_an_edited_approval_with_the_edited_arguments(tmp_path: Path) -> None:
    RAN.clear()
    door, store = _door(tmp_path)
    async with door.open_session() as session:
        await door.invoke(call("wire_money", amount=7, to="bob"), session=session)
        (request,) = store.pending()
        store.decide(ApprovalDecision(request_id=request.id, outcome="approved",
                                      arguments={"amount": 7, "to": "carol"}))
        result = await door.resume(request.id, session=session)
        twice = await door.resume(request.id, session=session)
    assert RAN == [(7, "carol")] and "Changed: to" in result.text
    assert twice.error_code == "already_executed"


async def test_edited_arguments_the_tool_does_not_take_run_nothing(tmp_path: Path) -> None:
    RAN.clear()
    door, store = _door(tmp_path)
    async with door.open_session() as session:
        await door.invoke(call("wire_money", amount=1, to="x"), session=session)
        (request,) = store.pending()
        store.decide(ApprovalDecision(request_id=request.id, outcome="approved",
                                      arguments={"amount": "lots", "to": "x"}))
        result = await door.invoke(call("wire_money", amount=1, to="x"), session=session)
    assert result.error_code == "invalid_arguments" and RAN == []
    assert "edited arguments" in result.text and "this approval will not run" in result.text


def test_changed_names_what_an_edit_changed_added_or_removed() -> None:
    assert changed({"a": 1, "b": [1], "c": 3}, {"a": 1, "b": [2], "d": 4}) == ["b", "c", "d"]
    assert changed({"a": 1, "b": None}, {"a": 1}) == []  # left out is null
