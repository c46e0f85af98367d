"""Every limit a gate reads comes from the call's own policy (``Invocation.policy``: a session's
over the invoker's), never from a copy a gate took when the invoker was built. For each field,
a session whose policy is tighter than the invoker's, and one whose policy is looser: the
session's value decides, approval included (the ceiling, ``unapproved_tools`` and every wait)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolkeeper import HitlMode, ToolRisk, tool
from toolkeeper.approval import PersistedApprovalHandler, SqliteApprovalStore
from toolkeeper.approval.handlers import CallbackApprovalHandler
from toolkeeper.invoke import ChainPolicy, InvocationResult, ToolInvoker
from toolkeeper.invoke.audit import SqliteAuditLog

from .helpers import call

pytestmark = pytest.mark.anyio


@tool(risk=ToolRisk.HIGH)
def deploy(target: str) -> str:
    """Deploy to a target."""
    return f"deployed {target}"


@tool(risk=ToolRisk.HIGH, hitl_mode=HitlMode.CONTINUE_ON_TIMEOUT)
def restart(service: str) -> str:
    """Restart a service."""
    return f"restarted {service}"


@tool(namespace="ops")
def text(n: int) -> str:
    """Return n characters."""
    return "x" * n


@tool
async def pause(seconds: float) -> str:
    """Sleep, then answer."""
    await anyio.sleep(seconds)
    return "done"


async def _never(request: object) -> bool:
    """A person who never answers."""
    await anyio.sleep_forever()
    return False


@dataclass(frozen=True)
class Case:
    """One field: the invoker's and the session's values, and what the session's value makes
    of a call (``outcome``), read from the call's result, its stored request or the audit."""

    field: str
    invoker: dict[str, Any]
    session: dict[str, Any]
    expected: object


Scenario = Callable[[ToolInvoker, Any, Path], Awaitable[object]]


async def _one(invoker: ToolInvoker, session: Any, name: str, **arguments: object
               ) -> InvocationResult:
    return await invoker.invoke(call(name, **arguments), session=session)


async def _deploy_status(invoker: ToolInvoker, session: Any, _tmp: Path) -> object:
    result = await _one(invoker, session, "deploy", target="prod")
    return result.status


async def _timeout_message(invoker: ToolInvoker, session: Any, _tmp: Path) -> object:
    result = await _one(invoker, session, "deploy", target="prod")
    assert result.error_code == "expired", result.text
    return result.text.split(": ", 1)[1].split(";", 1)[0]  # "nobody decided within N s"


async def _request_lifetime(invoker: ToolInvoker, session: Any, tmp: Path) -> object:
    result = await _one(invoker, session, "deploy", target="prod")
    assert result.status == "pending", result.text
    (stored,) = SqliteApprovalStore(tmp / "approvals.db").requests()
    assert stored.request.expires_at is not None
    return round(stored.request.expires_at - stored.request.created_at, 3)


async def _continue_decision(invoker: ToolInvoker, session: Any, tmp: Path) -> object:
    result = await _one(invoker, session, "restart", service="web")
    assert result.ok, result.text
    (stored,) = SqliteApprovalStore(tmp / "approvals.db").requests()
    assert stored.decision is not None and stored.request.expires_at is not None
    return (stored.decision.approver, stored.decision.message,
            round(stored.request.expires_at - stored.request.created_at, 3))


APPROVAL: list[tuple[Case, Callable[[Path], Any], Scenario]] = [
    # no handler: a call that asks is denied, one that does not ask runs
    (Case("max_risk_unapproved", {"max_risk_unapproved": ToolRisk.CRITICAL},
          {"max_risk_unapproved": ToolRisk.SAFE}, "denied"), lambda _: None, _deploy_status),
    (Case("max_risk_unapproved", {"max_risk_unapproved": ToolRisk.SAFE},
          {"max_risk_unapproved": ToolRisk.CRITICAL}, "ok"), lambda _: None, _deploy_status),
    (Case("unapproved_tools", {"unapproved_tools": frozenset({"deploy"})}, {}, "denied"),
     lambda _: None, _deploy_status),
    (Case("unapproved_tools", {}, {"unapproved_tools": frozenset({"deploy"})}, "ok"),
     lambda _: None, _deploy_status),
    # a person who never answers: the call waits the session's time, then is denied
    (Case("approval_timeout_s", {"approval_timeout_s": 5.0}, {"approval_timeout_s": 0.05},
          "nobody decided within 0.05 s"), lambda _: CallbackApprovalHandler(_never),
     _timeout_message),
    (Case("approval_timeout_s", {"approval_timeout_s": 0.05}, {"approval_timeout_s": 0.2},
          "nobody decided within 0.2 s"), lambda _: CallbackApprovalHandler(_never),
     _timeout_message),
    # a stored request that nobody waits for: it stays approvable the session's time
    (Case("approval_ttl_s", {"approval_ttl_s": 3600.0}, {"approval_ttl_s": 60.0}, 60.0),
     lambda tmp: PersistedApprovalHandler(SqliteApprovalStore(tmp / "approvals.db")),
     _request_lifetime),
    (Case("approval_ttl_s", {"approval_ttl_s": 60.0}, {"approval_ttl_s": 3600.0}, 3600.0),
     lambda tmp: PersistedApprovalHandler(SqliteApprovalStore(tmp / "approvals.db")),
     _request_lifetime),
    # CONTINUE_ON_TIMEOUT: approved on its own at the session's time
    (Case("hitl_timeout_seconds", {"hitl_timeout_seconds": 30.0, "approval_timeout_s": 0.05},
          {"hitl_timeout_seconds": 0.1},
          ("timeout", "approved automatically after 0.1 s without an answer", 0.1)),
     lambda tmp: PersistedApprovalHandler(SqliteApprovalStore(tmp / "approvals.db")),
     _continue_decision),
    (Case("hitl_timeout_seconds", {"hitl_timeout_seconds": 0.05},
          {"hitl_timeout_seconds": 0.2},
          ("timeout", "approved automatically after 0.2 s without an answer", 0.2)),
     lambda tmp: PersistedApprovalHandler(SqliteApprovalStore(tmp / "approvals.db")),
     _continue_decision),
]


@pytest.mark.parametrize(("case", "handler", "scenario"), APPROVAL,
                         ids=[f"{c.field}-{'tighter' if i % 2 == 0 else 'looser'}"
                              for i, (c, _, _) in enumerate(APPROVAL)])
async def test_a_sessions_policy_decides_approval(
        case: Case, handler: Callable[[Path], Any], scenario: Scenario, tmp_path: Path) -> None:
    invoker = ToolInvoker([deploy, restart], handler(tmp_path),
                          policy=ChainPolicy(**case.invoker))
    async with invoker.open_session(policy=ChainPolicy(**case.session)) as session:
        with anyio.fail_after(20):  # a wait that the session's policy does not bound fails here
            outcome = await scenario(invoker, session, tmp_path)
    assert outcome == case.expected


async def test_a_tool_that_asks_under_no_policy_skips_the_approval_gate() -> None:
    """The chain of a tool is folded once; only what no session's policy can change may leave
    a gate out of it: a SAFE tool that does not ask, never a risky one."""
    invoker = ToolInvoker([deploy, text], policy=ChainPolicy(
        max_risk_unapproved=ToolRisk.CRITICAL))
    (gate,) = [g for g in invoker.gates if g.name == "approval"]
    assert gate.needed(deploy) and not gate.needed(text)


async def _statuses(invoker: ToolInvoker, session: Any, calls: list[tuple[str, dict[str, Any]]]
                    ) -> list[str]:
    return [(await _one(invoker, session, name, **args)).status for name, args in calls]


async def _texts(invoker: ToolInvoker, session: Any, _tmp: Path) -> object:
    result = await _one(invoker, session, "ops-text", n=50)
    return (len(result.text), result.artifact_ref is not None)


async def _pause(invoker: ToolInvoker, session: Any, _tmp: Path) -> object:
    result = await _one(invoker, session, "pause", seconds=0.3)
    return result.error_code or result.status


async def _twice(invoker: ToolInvoker, session: Any, _tmp: Path) -> object:
    return await _statuses(invoker, session, [("ops-text", {"n": 1}), ("ops-text", {"n": 1})])


async def _deep(invoker: ToolInvoker, session: Any, _tmp: Path) -> object:
    nested: object = 1
    for _ in range(4):
        nested = [nested]
    result = await _one(invoker, session, "pause", seconds=0, extra=nested)
    return "bounded" if "nest" in result.text or "values" in result.text else result.error_code


async def _audited(invoker: ToolInvoker, session: Any, tmp: Path) -> object:
    for _ in range(3):
        await _one(invoker, session, "nothing_here")
    return len(SqliteAuditLog(tmp / "audit.db").query())


OTHERS: list[tuple[Case, Scenario]] = [
    (Case("max_tool_calls", {"max_tool_calls": 5}, {"max_tool_calls": 1}, ["ok", "error"]),
     _twice),
    (Case("max_tool_calls", {"max_tool_calls": 1}, {"max_tool_calls": 5}, ["ok", "ok"]),
     _twice),
    (Case("tool_budgets", {"tool_budgets": {"ops-text": 5}}, {"tool_budgets": {"ops-text": 1}},
          ["ok", "error"]), _twice),
    (Case("tool_budgets", {"tool_budgets": {"ops-text": 1}}, {"tool_budgets": {"ops-text": 5}},
          ["ok", "ok"]), _twice),
    (Case("namespace_budgets", {"namespace_budgets": {"ops": 5}},
          {"namespace_budgets": {"ops": 1}}, ["ok", "error"]), _twice),
    (Case("namespace_budgets", {"namespace_budgets": {"ops": 1}},
          {"namespace_budgets": {"ops": 5}}, ["ok", "ok"]), _twice),
    (Case("max_result_size", {"max_result_size": 100}, {"max_result_size": 10},
          (10 + len("\n[... 40 characters truncated ...]\n"), False)), _texts),
    (Case("max_result_size", {"max_result_size": 10}, {"max_result_size": 100}, (50, False)),
     _texts),
    (Case("call_timeout_s", {"call_timeout_s": 30.0, "approval_timeout_s": 20.0},
          {"call_timeout_s": 0.1, "approval_timeout_s": 0.05}, "timeout"), _pause),
    (Case("call_timeout_s", {"call_timeout_s": 0.1, "approval_timeout_s": 0.05},
          {"call_timeout_s": 30.0, "approval_timeout_s": 20.0}, "ok"), _pause),
    (Case("total_timeout_s", {"total_timeout_s": 30.0}, {"total_timeout_s": 0.1}, "timeout"),
     _pause),
    (Case("total_timeout_s", {"total_timeout_s": 0.1}, {"total_timeout_s": 30.0}, "ok"),
     _pause),
    (Case("max_argument_depth", {"max_argument_depth": 64}, {"max_argument_depth": 3},
          "bounded"), _deep),
    (Case("max_argument_depth", {"max_argument_depth": 3}, {"max_argument_depth": 64},
          "invalid_arguments"), _deep),  # within the bound: refused as an unknown argument
    (Case("max_audit_rows", {"max_audit_rows": 10}, {"max_audit_rows": 1}, 1), _audited),
    (Case("max_audit_rows", {"max_audit_rows": 1}, {"max_audit_rows": 10}, 3), _audited),
]


@pytest.mark.parametrize(("case", "scenario"), OTHERS,
                         ids=[f"{c.field}-{'tighter' if i % 2 == 0 else 'looser'}"
                              for i, (c, _) in enumerate(OTHERS)])
async def test_a_sessions_policy_decides_every_other_limit(
        case: Case, scenario: Scenario, tmp_path: Path) -> None:
    invoker = ToolInvoker([text, pause], policy=ChainPolicy(**case.invoker),
                          audit=SqliteAuditLog(tmp_path / "audit.db"))
    async with invoker.open_session(policy=ChainPolicy(**case.session)) as session:
        with anyio.fail_after(20):
            outcome = await scenario(invoker, session, tmp_path)
    assert outcome == case.expected
