"""A request nobody decided in time is ``expired``: its own outcome in the store, the audit log
and what the model reads ("nobody decided within …; it did not run; call again to ask
again"), never a denial."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from toolkeeper import tool
from toolkeeper.approval import (
    ApprovalDecision,
    ApprovalOutcome,
    ApprovalRequest,
    PersistedApprovalHandler,
    SqliteApprovalStore,
)
from toolkeeper.invoke import ChainPolicy, ToolInvoker
from toolkeeper.invoke.audit import SqliteAuditLog
from toolkeeper.toolbox import Toolbox

from ..invoke.helpers import call

pytestmark = pytest.mark.anyio
RAN: list[str] = []


@tool(risk="critical")
def wire_money(amount: int, to: str) -> str:
    """Send money."""
    RAN.append(to)
    return f"sent {amount} to {to}"


async def test_a_call_nobody_decided_in_time_is_told_it_expired_not_that_it_was_denied(
        tmp_path: Path) -> None:
    store = SqliteApprovalStore(tmp_path / "e.db")
    policy = ChainPolicy(approval_timeout_s=0.2, call_timeout_s=5)
    inv = ToolInvoker(Toolbox([wire_money]), PersistedApprovalHandler(store, wait_s=30,
                                                                      poll_s=0.02),
                      policy=policy)
    async with inv.open_session() as session:
        result = await inv.invoke(call("wire_money", amount=1, to="late"), session=session)
    assert (result.status, result.error_code) == ("error", "expired"), result.text
    assert "nobody decided within 0.2 s" in result.text
    assert "it did not run" in result.text and "call it again to ask again" in result.text
    assert "denied" not in result.text and "not approved" not in result.text
    assert RAN == []
    (stored,) = store.requests()
    assert stored.state == "expired" and stored.decision is not None
    assert stored.decision.outcome == "expired"
    assert not store.decide(ApprovalDecision(request_id=stored.request.id, outcome="approved"))
    (row,) = SqliteAuditLog(store.db).query()
    assert (row.status, row.error_code, row.decision) == ("expired", "expired", "expired")


async def test_a_request_past_its_time_to_live_is_stored_expired(tmp_path: Path) -> None:
    store = SqliteApprovalStore(tmp_path / "t.db")
    now = time.time()
    request = ApprovalRequest(call_id="c1", tool="wire_money", risk="critical",
                              arguments={"amount": 1}, args_digest="d", session_id="s",
                              created_at=now - 10, expires_at=now - 1)
    store.create(request)
    assert store.settle() == [request.id]
    stored = store.get(request.id)
    assert stored is not None and stored.state == "expired"
    assert stored.decision is not None and stored.decision.outcome == "expired"
    assert "nobody decided within 9 s" in stored.decision.message
    assert [state for _, _, state in store.events(0)] == ["pending", "expired"]


def test_a_store_written_before_reads_its_timed_out_requests_as_expired(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    request = ApprovalRequest(call_id="c1", tool="wire_money", risk="critical",
                              arguments={"amount": 1}, args_digest="d", session_id="s")
    SqliteApprovalStore(path).create(request)
    old = {"request_id": request.id, "outcome": "timeout", "message": "no decision within 5 s",
           "approver": "", "scope": "once", "decided_at": time.time()}
    with sqlite3.connect(path) as conn:  # what an earlier release wrote
        conn.execute("UPDATE approvals SET state = 'timeout', decision = ?",
                     (json.dumps(old),))
    stored = SqliteApprovalStore(path).get(request.id)
    assert stored is not None and stored.state == "expired"
    assert stored.decision is not None and stored.decision.outcome == "expired"


def test_the_outcome_keeps_its_old_name_as_an_alias() -> None:
    assert ApprovalOutcome("timeout") is ApprovalOutcome.EXPIRED
    assert str(ApprovalOutcome.EXPIRED.value) == "expired"
    assert ApprovalDecision.TIMEOUT is ApprovalDecision.EXPIRED
    assert ApprovalDecision(request_id="r", outcome="timeout").outcome == "expired"
