"""Approval: HITL modes, handlers, session scope, pending runs and resume exactly once."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from toolkeeper import tool
from toolkeeper.approval import (
    ApprovalDecision,
    AutoApprovalHandler,
    CallbackApprovalHandler,
    CliApprovalHandler,
    PersistedApprovalHandler,
    SqliteApprovalStore,
)
from toolkeeper.invoke import ChainPolicy, ToolInvoker
from toolkeeper.toolbox import Toolbox

from ..invoke.helpers import call, invoker, recording_hooks

pytestmark = pytest.mark.anyio
RUNS: list[str] = []


@tool(risk="critical", hitl_mode="continue_on_timeout")
def restart_service(name: str) -> str:
    """Restart a service."""
    RUNS.append(name)
    return f"restarted {name}"


@tool(risk="high", hitl_mode="fire_and_continue")
def post_note(text: str) -> str:
    """Post a note."""
    return "posted"


@tool(risk="critical")
def wire_money(amount: int, to: str) -> str:
    """Send money."""
    RUNS.append(f"{amount}->{to}")
    return f"sent {amount} to {to}"


def box() -> Toolbox:
    return Toolbox([restart_service, post_note, wire_money])


async def test_auto_handler_approves_and_rules_can_deny() -> None:
    inv = ToolInvoker(box(), AutoApprovalHandler(rule=lambda r: int(str(r.arguments["amount"])) < 100))
    async with inv.open_session() as session:
        small = await inv.invoke(call("wire_money", amount=5, to="bob"), session=session)
        large = await inv.invoke(call("wire_money", amount=500, to="eve"), session=session)
    assert small.status == "ok" and small.approval_id
    assert (large.status, large.error_code) == ("denied", "denied")
    assert "was not approved" in large.text


async def test_blocking_waits_then_the_request_expires() -> None:
    async def never(request: object) -> ApprovalDecision:
        await anyio.sleep(10)
        raise AssertionError("unreachable")

    policy = ChainPolicy(approval_timeout_s=0.1, call_timeout_s=1)
    inv = ToolInvoker(box(), CallbackApprovalHandler(never), policy=policy)
    async with inv.open_session() as session:
        result = await inv.invoke(call("wire_money", amount=1, to="x"), session=session)
    assert (result.status, result.error_code) == ("error", "expired")
    assert "nobody decided within 0.1 s" in result.text


async def test_continue_on_timeout_approves_after_waiting_and_records_it() -> None:
    async def slow_human(request: object) -> ApprovalDecision:
        await anyio.sleep(10)
        raise AssertionError("unreachable")

    hooks, events = recording_hooks()
    policy = ChainPolicy(hitl_timeout_seconds=0.1)
    inv = ToolInvoker(box(), CallbackApprovalHandler(slow_human), policy=policy, hooks=hooks)
    async with inv.open_session() as session:
        result = await inv.invoke(call("restart_service", name="db"), session=session)
    assert result.text == "restarted db"
    decided = next(p for e, p in events if e == "approval_decided")["decision"]
    assert decided["approver"] == "timeout" and decided["outcome"] == "approved"


async def test_fire_and_continue_announces_and_proceeds() -> None:
    hooks, events = recording_hooks()
    asked: list[object] = []
    inv = ToolInvoker(box(), CallbackApprovalHandler(asked.append), hooks=hooks)
    async with inv.open_session() as session:
        result = await inv.invoke(call("post_note", text="hi"), session=session)
    assert result.status == "ok" and asked == []
    assert "approval_requested" in [e for e, _ in events]


async def test_session_scope_approves_the_tool_for_the_rest_of_the_session() -> None:
    asked: list[str] = []

    def once(request: object) -> ApprovalDecision:
        asked.append(request.tool)  # type: ignore[attr-defined]
        return ApprovalDecision(request_id=request.id, outcome="approved",  # type: ignore[attr-defined]
                                scope="session")

    inv = ToolInvoker(box(), CallbackApprovalHandler(once))
    async with inv.open_session() as session:
        for amount in (1, 2, 3):
            assert (await inv.invoke(call("wire_money", amount=amount, to="a"),
                                     session=session)).ok
    assert asked == ["wire_money"]


async def test_a_stored_session_grant_holds_in_every_process_of_that_session_but_not_scripts(
        tmp_path: Path) -> None:
    # one store shared by two invokers, as by two workers: "approve for this client" given
    # through one holds in the other for the same session id; a script run under that
    # session id (code mode's) still asks, as a script's calls always did
    from toolkeeper.approval.models import ApprovalRequest

    asked: list[object] = []
    store = SqliteApprovalStore(tmp_path / "approvals.db")

    class Person:
        """Decides in the shared store, as a person on the page does."""

        async def request(self, request: ApprovalRequest) -> ApprovalDecision:
            asked.append(request.arguments["amount"])
            decision = ApprovalDecision(request_id=request.id, outcome="approved",
                                        scope="session", approver="alice")
            store.create(request)
            assert store.decide(decision)
            return decision

    first, second = (ToolInvoker(box(), Person(), approval_store=store) for _ in range(2))
    async with first.open_session(session_id="client-a") as session:
        assert (await first.invoke(call("wire_money", amount=1, to="a"), session=session)).ok
        assert (await first.invoke(call("wire_money", amount=5, to="a"), session=session)).ok
    async with second.open_session(session_id="client-a") as session:
        assert (await second.invoke(call("wire_money", amount=2, to="a"), session=session)).ok
    async with second.open_session(session_id="client-b") as session:
        assert (await second.invoke(call("wire_money", amount=3, to="a"), session=session)).ok
    async with second.open_session(session_id="client-a", chain=True) as session:
        assert (await second.invoke(call("wire_money", amount=4, to="a"), session=session)).ok
    assert asked == [1, 3, 4]


async def test_cli_handler_without_a_terminal_denies_and_says_why() -> None:
    inv = ToolInvoker(box(), CliApprovalHandler(is_tty=lambda: False))
    async with inv.open_session() as session:
        result = await inv.invoke(call("wire_money", amount=1, to="a"), session=session)
    assert result.status == "denied" and "no terminal" in result.text


async def test_cli_handler_asks_with_the_arguments() -> None:
    from io import StringIO

    from rich.console import Console

    out = StringIO()
    handler = CliApprovalHandler(console=Console(file=out, width=100), is_tty=lambda: True,
                                 ask=lambda prompt: "y")
    inv = ToolInvoker(box(), handler)
    async with inv.open_session() as session:
        assert (await inv.invoke(call("wire_money", amount=7, to="carol"), session=session)).ok
    assert "wire_money" in out.getvalue() and "carol" in out.getvalue()


async def test_a_long_wait_ends_pending_and_resume_runs_the_call_exactly_once(tmp_path: Path) -> None:
    store = SqliteApprovalStore(tmp_path / "toolkeeper.db")
    inv = ToolInvoker(box(), PersistedApprovalHandler(store, wait_s=0))
    RUNS.clear()
    async with inv.open_session() as session:
        pending = await inv.invoke(call("wire_money", amount=9, to="dan"), session=session)
        assert pending.status == "pending" and pending.approval_id
        assert [r.id for r in store.pending()] == [pending.approval_id]
        not_yet = await inv.resume(pending.approval_id, session=session)
        assert not_yet.status == "pending"
        store.decide(ApprovalDecision(request_id=pending.approval_id, outcome="approved",
                                      approver="alice"))
        changed = await inv.resume(pending.approval_id, session=session,
                                   arguments={"amount": 9000, "to": "dan"})
        assert changed.status == "denied" and "differ" in changed.text
        first = await inv.resume(pending.approval_id, session=session)
        second = await inv.resume(pending.approval_id, session=session)
    assert first.text == "sent 9 to dan"
    assert (second.status, second.error_code) == ("error", "already_executed")
    assert RUNS == ["9->dan"]
    assert store.get(pending.approval_id).state == "done"  # type: ignore[union-attr]


async def test_a_decision_is_final_and_applies_once(tmp_path: Path) -> None:
    store = SqliteApprovalStore(tmp_path / "a.db")
    inv = ToolInvoker(box(), PersistedApprovalHandler(store))
    async with inv.open_session() as session:
        pending = await inv.invoke(call("wire_money", amount=1, to="x"), session=session)
    assert pending.approval_id is not None
    assert store.decide(ApprovalDecision(request_id=pending.approval_id, outcome="denied"))
    assert not store.decide(ApprovalDecision(request_id=pending.approval_id, outcome="approved"))
    async with inv.open_session() as session:
        result = await inv.resume(pending.approval_id, session=session)
    assert result.status == "denied"


async def test_persisted_handler_waits_for_a_decision_from_elsewhere(tmp_path: Path) -> None:
    store = SqliteApprovalStore(tmp_path / "w.db")
    inv = ToolInvoker(box(), PersistedApprovalHandler(store, wait_s=5, poll_s=0.02))

    async def approve_soon() -> None:
        while not store.pending():
            await anyio.sleep(0.01)
        request = store.pending()[0]
        store.decide(ApprovalDecision(request_id=request.id, outcome="approved", approver="web"))

    async with inv.open_session() as session, anyio.create_task_group() as group:
        group.start_soon(approve_soon)
        result = await inv.invoke(call("wire_money", amount=3, to="z"), session=session)
    assert result.text == "sent 3 to z"


async def test_no_handler_denies_everything_above_the_ceiling_but_the_ceiling_can_rise() -> None:
    relaxed = invoker(policy=ChainPolicy(max_risk_unapproved="critical"))
    async with relaxed.open_session() as session:
        assert (await relaxed.invoke(call("delete_file", path="/t"), session=session)).ok


async def test_a_stored_request_that_expired_cannot_be_approved_later(tmp_path: Path) -> None:
    store = SqliteApprovalStore(tmp_path / "t.db")
    policy = ChainPolicy(approval_timeout_s=0.2, call_timeout_s=5)
    inv = ToolInvoker(box(), PersistedApprovalHandler(store, wait_s=30, poll_s=0.02),
                      policy=policy)
    async with inv.open_session() as session:
        result = await inv.invoke(call("wire_money", amount=1, to="late"), session=session)
    assert result.error_code == "expired" and "nobody decided within 0.2 s" in result.text
    (stored,) = [store.get(r) for r in [str(store.db.query("SELECT id FROM approvals")[0][0])]]
    assert stored is not None and stored.state == "expired"
    assert not store.decide(ApprovalDecision(request_id=stored.request.id, outcome="approved"))


async def test_the_same_call_made_again_rejoins_its_request_and_runs_once_approved(
        tmp_path: Path) -> None:
    """A client that retries a call (after 'pending', or after a restart) does not flood the
    inbox: the retry waits on the open request, and once approved the next retry runs it once."""
    store = SqliteApprovalStore(tmp_path / "r.db")
    RUNS.clear()
    async with ToolInvoker(box(), PersistedApprovalHandler(store, wait_s=0)).open_session(
            session_id="client-a") as session:
        first = await session.invoker.invoke(call("wire_money", amount=4, to="eve"),
                                             session=session)
        again = await session.invoker.invoke(call("wire_money", amount=4, to="eve"),
                                             session=session)
        other = await session.invoker.invoke(call("wire_money", amount=5, to="eve"),
                                             session=session)
    assert first.status == again.status == other.status == "pending"
    assert again.approval_id == first.approval_id != other.approval_id
    assert "Call the same tool again with the same arguments" in first.text
    assert len(store.pending()) == 2
    store.decide(ApprovalDecision(request_id=first.approval_id or "", outcome="approved"))
    # a new invoker over the same store: the process that asked is gone
    fresh = ToolInvoker(box(), PersistedApprovalHandler(store, wait_s=0))
    async with fresh.open_session(session_id="client-a") as session:
        ran = await fresh.invoke(call("wire_money", amount=4, to="eve"), session=session)
        told = await fresh.invoke(call("wire_money", amount=4, to="eve"), session=session)
        asks_anew = await fresh.invoke(call("wire_money", amount=4, to="eve"), session=session)
    async with fresh.open_session(session_id="client-b") as elsewhere:
        foreign = await fresh.invoke(call("wire_money", amount=5, to="eve"), session=elsewhere)
    assert (ran.status, ran.text, ran.approval_id) == ("ok", "sent 4 to eve", first.approval_id)
    # made again after its run: told that run's result once (its caller may have given up)
    assert told.status == "ok" and told.text.startswith("sent 4 to eve") and not told.ran
    assert "does not run twice" in told.text and told.approval_id == first.approval_id
    assert asks_anew.status == "pending" and asks_anew.approval_id != first.approval_id
    assert foreign.approval_id != other.approval_id  # another session never rejoins it
    assert RUNS == ["4->eve"]
