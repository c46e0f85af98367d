"""The audit row of a call that went through approval says which request and who decided:
an approved run, a denied call, a call answered once approved and resumed, and a call whose
client gave up while it waited (its request stays, and its row points at it)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import anyio
import pytest

from toolkeeper import tool
from toolkeeper.approval import (
    ApprovalDecision,
    ApprovalRequest,
    CallbackApprovalHandler,
    PersistedApprovalHandler,
    SqliteApprovalStore,
)
from toolkeeper.invoke import ToolInvoker
from toolkeeper.invoke.audit import SqliteAuditLog

from .helpers import call

pytestmark = pytest.mark.anyio


@tool(risk="critical")
def wire(amount: int) -> str:
    """Wire money."""
    return f"wired {amount}"


def _decided_by(approver: str, outcome: str) -> CallbackApprovalHandler:
    def decide(request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision(request_id=request.id, outcome=outcome,
                                approver=approver, message="checked the account")
    return CallbackApprovalHandler(decide)


async def test_an_approved_run_is_audited_with_its_approval_and_approver(tmp_path: Path) -> None:
    audit = SqliteAuditLog(tmp_path / "audit.db")
    invoker = ToolInvoker([wire], _decided_by("web:alice", "approved"), audit=audit)
    async with invoker.open_session() as session:
        result = await invoker.invoke(call("wire", amount=5), session=session)
    assert result.ok and result.approval_id
    [row] = audit.query()
    assert (row.status, row.approval_id, row.approver, row.decision) == (
        "ok", result.approval_id, "web:alice", "approved")


async def test_a_denied_call_is_audited_with_its_approval_and_who_denied(tmp_path: Path) -> None:
    audit = SqliteAuditLog(tmp_path / "audit.db")
    invoker = ToolInvoker([wire], _decided_by("api:bob", "denied"), audit=audit)
    async with invoker.open_session() as session:
        result = await invoker.invoke(call("wire", amount=5), session=session)
    assert result.status == "denied"
    [row] = audit.query()
    assert row.status == "denied" and row.approval_id is not None
    assert row.approval_id.startswith("apr_")
    assert (row.approver, row.decision) == ("api:bob", "denied")


async def test_a_resumed_run_is_audited_with_who_approved_it(tmp_path: Path) -> None:
    store = SqliteApprovalStore(tmp_path / "a.db")
    audit = SqliteAuditLog(tmp_path / "a.db")
    invoker = ToolInvoker([wire], PersistedApprovalHandler(store, wait_s=0), audit=audit)
    async with invoker.open_session() as session:
        pending = await invoker.invoke(call("wire", amount=7), session=session)
        assert pending.status == "pending" and pending.approval_id
        store.decide(ApprovalDecision(request_id=pending.approval_id, outcome="approved",
                                      approver="operator"))
        done = await invoker.resume(pending.approval_id, session=session)
    assert done.ok
    row = audit.query(status="ok")[0]
    assert (row.approval_id, row.approver, row.decision) == (
        pending.approval_id, "operator", "approved")


async def test_a_call_cancelled_while_it_waits_is_audited_with_its_request(tmp_path: Path
                                                                           ) -> None:
    store = SqliteApprovalStore(tmp_path / "a.db")
    audit = SqliteAuditLog(tmp_path / "a.db")
    invoker = ToolInvoker([wire], PersistedApprovalHandler(store, wait_s=60, poll_s=0.01),
                          audit=audit)
    async with invoker.open_session() as session, anyio.create_task_group() as group:
        group.start_soon(partial(invoker.invoke, call("wire", amount=9), session=session))
        while not store.pending():  # the request is stored: the call now waits for a person
            await anyio.sleep(0.01)
        group.cancel_scope.cancel()
    [waiting] = store.pending()
    [row] = audit.query()
    assert (row.status, row.error_code) == ("error", "cancelled")
    assert row.approval_id == waiting.id
    assert row.approver is None
