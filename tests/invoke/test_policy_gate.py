"""The policy gate in the door: a forbid written after a person approved a call still refuses
it when the call is resumed, and the refusal is in the audit row with the policy that fired."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from toolkeeper import ApprovalDecision, PersistedApprovalHandler, SqliteApprovalStore, tool
from toolkeeper.invoke import ToolInvoker
from toolkeeper.invoke.audit import SqliteAuditLog
from toolkeeper.policy import Policies, PolicyRule, PolicyStore
from toolkeeper.toolbox import Toolbox

from .helpers import call

pytestmark = pytest.mark.anyio


@tool(risk="critical")
def wire(amount: int) -> str:
    """Wire money."""
    return f"wired {amount}"


async def test_a_forbid_written_after_the_approval_refuses_the_resumed_call(tmp_path: Path
                                                                           ) -> None:
    db = tmp_path / "state.db"
    store, rules, box = SqliteApprovalStore(db), PolicyStore(db), Toolbox([wire])
    policies = Policies(box, store=rules)
    invoker = ToolInvoker(box, PersistedApprovalHandler(store, wait_s=0),
                          audit=SqliteAuditLog(db), policies=policies)
    async with invoker.open_session() as session:
        pending = await invoker.invoke(call("wire", amount=70), session=session)
        assert pending.status == "pending" and pending.approval_id
        store.decide(ApprovalDecision(request_id=pending.approval_id, outcome="approved",
                                      approver="operator"))
        rules.add(PolicyRule(id="rule_freeze", author="ann", reason="payments are frozen",
                             created=time.time(), cedar='forbid (principal, action == '
                             'Action::"wire", resource) when { context.args.amount > 50 };'))
        assert policies.refresh()
        done = await invoker.resume(pending.approval_id, session=session)
    assert (done.status, done.error_code) == ("denied", "policy_denied")
    assert "policy rule_freeze (payments are frozen)" in done.text
    row = SqliteAuditLog(db).query(status="denied")[-1]
    assert (row.error_code, row.decision) == ("policy_denied", "policy_denied: rule_freeze")
