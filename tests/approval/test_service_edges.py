"""Approval paths the main tests do not walk: a handler that answers 'pending' or fails, a
person's answer that lands as the wait times out, a request another process took first, a
handler told that the wait ended, the plain handlers' other answers, a store without the
optional abilities, and the SQLite layer's errors."""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from rich.console import Console

from toolkeeper import tool
from toolkeeper.approval import (
    ApprovalDecision,
    ApprovalRequest,
    AutoApprovalHandler,
    CallbackApprovalHandler,
    CliApprovalHandler,
    PersistedApprovalHandler,
    PostgresApprovalStore,
    SqliteApprovalStore,
    StoredApproval,
)
from toolkeeper.approval.service import ApprovalService, WaitPolicy
from toolkeeper.approval.sqlite import SqliteFile
from toolkeeper.core.context import ToolContext
from toolkeeper.core.risk import HitlMode, ToolRisk
from toolkeeper.errors import StoreError
from toolkeeper.invoke import ChainPolicy, ToolInvoker

from ..invoke.helpers import call

pytestmark = pytest.mark.anyio
RUNS: list[int] = []


@tool(risk="critical")
def pay(amount: int) -> str:
    """Pay an amount."""
    RUNS.append(amount)
    return f"paid {amount}"


@tool(risk="critical")
def report(rows: int) -> dict[str, Any]:
    """A report of ``rows`` rows."""
    RUNS.append(rows)
    return {"rows": ["r" * 100] * rows}


def _request(session: str = "s1", amount: int = 1) -> ApprovalRequest:
    return ApprovalRequest.for_call(call_id="c1", tool="pay", risk=ToolRisk.CRITICAL,
                                    hitl_mode=HitlMode.BLOCKING, arguments={"amount": amount},
                                    session_id=session, reason="test", timeout_s=None)


async def test_a_handler_that_answers_pending_ends_the_call_pending_naming_the_request() -> None:
    RUNS.clear()
    handler = CallbackApprovalHandler(
        lambda r: ApprovalDecision(request_id=r.id, outcome="pending"))
    invoker = ToolInvoker([pay], handler)
    async with invoker.open_session() as session:
        result = await invoker.invoke(call("pay", amount=3), session=session)
    assert (result.status, result.error_code) == ("pending", "pending")
    assert result.approval_id is not None and result.approval_id.startswith("apr_")
    assert f"toolkeeper approvals decide {result.approval_id} approve" in result.text
    assert "Nothing ran yet" in result.text
    assert RUNS == []


async def test_a_handler_that_fails_while_the_caller_hears_progress_fails_the_call_plainly(
) -> None:
    RUNS.clear()

    def offline(request: ApprovalRequest) -> bool:
        raise RuntimeError("approver offline")

    invoker = ToolInvoker([pay], CallbackApprovalHandler(offline))
    ctx = ToolContext(progress_sink=lambda progress, total, message: None)
    async with invoker.open_session() as session:
        result = await invoker.invoke(call("pay", amount=3), session=session, ctx=ctx)
    assert (result.status, result.error_code) == ("error", "invoker_error")
    assert "RuntimeError: approver offline" in result.text
    assert "ExceptionGroup" not in result.text  # raised as itself, not from inside a task group
    assert RUNS == []


async def test_a_caller_that_cannot_take_progress_still_gets_its_approved_call() -> None:
    RUNS.clear()
    told: list[str | None] = []

    def sink(progress: float, total: float | None, message: str | None) -> None:
        told.append(message)
        raise ConnectionError("client gone")

    async def slow_yes(request: ApprovalRequest) -> bool:
        await anyio.sleep(0.1)
        return True

    invoker = ToolInvoker([pay], CallbackApprovalHandler(slow_yes))
    async with invoker.open_session() as session:
        result = await invoker.invoke(call("pay", amount=4), session=session,
                                      ctx=ToolContext(progress_sink=sink))
    assert (result.status, result.text) == ("ok", "paid 4")
    assert len(told) == 1 and told[0] is not None
    assert told[0].startswith("waiting for a person to approve 'pay' (request apr_")
    assert RUNS == [4]


async def test_a_persons_answer_that_lands_as_the_wait_times_out_stands(tmp_path: Path) -> None:
    RUNS.clear()
    store = SqliteApprovalStore(tmp_path / "a.db")

    class LastMoment:
        """Stores the request; a person approves it at once, but the handler never notices
        and the call's wait runs out."""

        async def request(self, request: ApprovalRequest) -> ApprovalDecision:
            store.create(request)
            store.decide(ApprovalDecision(request_id=request.id, outcome="approved",
                                          approver="alice"))
            await anyio.sleep(30)
            raise AssertionError("the wait should have ended")

    # The wait must outlast the handler's two writes even on a busy machine (0.2 s did not):
    # the answer is stored before the wait ends, and the handler never reports it.
    policy = ChainPolicy(approval_timeout_s=3, call_timeout_s=10)
    invoker = ToolInvoker([pay], LastMoment(), approval_store=store, policy=policy)
    async with invoker.open_session() as session:
        result = await invoker.invoke(call("pay", amount=5), session=session)
    assert (result.status, result.text) == ("ok", "paid 5")
    stored = store.get(result.approval_id or "")
    assert stored is not None and stored.state == "done"
    assert stored.decision is not None and stored.decision.approver == "alice"
    assert RUNS == [5]


async def test_a_request_another_process_took_first_does_not_run_here(tmp_path: Path) -> None:
    RUNS.clear()
    store = SqliteApprovalStore(tmp_path / "a.db")

    class Racing:
        """Approved, but another replica claims the request before this call takes it."""

        async def request(self, request: ApprovalRequest) -> ApprovalDecision:
            store.create(request)
            decision = ApprovalDecision(request_id=request.id, outcome="approved",
                                        approver="bob")
            assert store.decide(decision)
            assert store.claim(request.id)
            return decision

    invoker = ToolInvoker([pay], Racing(), approval_store=store)
    async with invoker.open_session() as session:
        result = await invoker.invoke(call("pay", amount=6), session=session)
    assert (result.status, result.error_code) == ("pending", "pending")
    assert "is being run by another call made the same way; it runs once" in result.text
    assert RUNS == []


async def test_a_request_the_store_never_saw_is_the_calls_own(tmp_path: Path) -> None:
    RUNS.clear()
    store = SqliteApprovalStore(tmp_path / "a.db")
    invoker = ToolInvoker([pay], CallbackApprovalHandler(lambda r: True), approval_store=store)
    async with invoker.open_session() as session:
        result = await invoker.invoke(call("pay", amount=7), session=session)
    assert (result.status, result.text) == ("ok", "paid 7")
    assert store.requests() == []
    assert RUNS == [7]


async def test_a_handler_without_a_store_is_told_when_the_wait_ends() -> None:
    RUNS.clear()

    class Forgetful:
        def __init__(self) -> None:
            self.expired: list[ApprovalDecision] = []

        async def request(self, request: ApprovalRequest) -> ApprovalDecision:
            await anyio.sleep(30)
            raise AssertionError("the wait should have ended")

        async def expire(self, decision: ApprovalDecision) -> None:
            self.expired.append(decision)

    handler = Forgetful()
    policy = ChainPolicy(approval_timeout_s=0.1, call_timeout_s=5)
    invoker = ToolInvoker([pay], handler, policy=policy)
    async with invoker.open_session() as session:
        result = await invoker.invoke(call("pay", amount=8), session=session)
    assert (result.status, result.error_code) == ("error", "expired")
    assert "nobody decided within 0.1 s" in result.text
    assert [(d.outcome, d.request_id.startswith("apr_")) for d in handler.expired] == [
        ("expired", True)]
    assert RUNS == []


async def test_the_persisted_handler_expires_a_request_so_a_late_answer_cannot_apply(
        tmp_path: Path) -> None:
    store = SqliteApprovalStore(tmp_path / "a.db")
    handler = PersistedApprovalHandler(store, wait_s=0)
    request = _request()
    assert (await handler.request(request)).outcome == "pending"
    await handler.expire(ApprovalDecision(request_id=request.id, outcome="expired"))
    assert store.get(request.id).state == "expired"  # type: ignore[union-attr]
    assert not store.decide(ApprovalDecision(request_id=request.id, outcome="approved"))


async def test_an_approved_run_keeps_a_small_structured_result_to_tell_again_not_a_large_one(
        tmp_path: Path) -> None:
    RUNS.clear()
    store = SqliteApprovalStore(tmp_path / "a.db")
    invoker = ToolInvoker([report], PersistedApprovalHandler(store, wait_s=0))
    told: dict[int, Any] = {}
    async with invoker.open_session(session_id="client") as session:
        for rows in (2, 1000):  # 2 rows: ~200 bytes of JSON; 1,000 rows: ~100 KiB
            pending = await invoker.invoke(call("report", rows=rows), session=session)
            assert pending.status == "pending" and pending.approval_id
            store.decide(ApprovalDecision(request_id=pending.approval_id, outcome="approved"))
            ran = await invoker.invoke(call("report", rows=rows), session=session)
            assert ran.ok and ran.ran and ran.structured == {"rows": ["r" * 100] * rows}
            told[rows] = await invoker.invoke(call("report", rows=rows), session=session)
    assert RUNS == [2, 1000]  # each ran once
    small, large = told[2], told[1000]
    assert small.ok and not small.ran and small.structured == {"rows": ["r" * 100] * 2}
    assert large.ok and not large.ran and large.structured is None
    assert "it does not run twice" in large.text


async def test_the_plain_handlers_other_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    RUNS.clear()
    by_rule = AutoApprovalHandler(rule=lambda r: ApprovalDecision(
        request_id=r.id, outcome="denied", message="over the daily limit", approver="rule"))

    async def async_no(request: ApprovalRequest) -> bool:
        return False

    invoker = ToolInvoker([pay], by_rule)
    yes = ToolInvoker([pay], CallbackApprovalHandler(lambda r: 1))
    no = ToolInvoker([pay], CallbackApprovalHandler(async_no))
    async with invoker.open_session() as session:
        ruled = await invoker.invoke(call("pay", amount=1), session=session)
    async with yes.open_session() as session:
        approved = await yes.invoke(call("pay", amount=2), session=session)
    async with no.open_session() as session:
        denied = await no.invoke(call("pay", amount=3), session=session)
    assert ruled.status == "denied" and "over the daily limit" in ruled.text
    assert approved.ok and approved.approval_id is not None
    assert denied.status == "denied" and "(denied)" in denied.text
    assert RUNS == [2]


async def test_the_cli_handler_prompts_on_the_terminal_and_s_approves_for_the_session(
        monkeypatch: pytest.MonkeyPatch) -> None:
    RUNS.clear()
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdin", io.StringIO("s\n"))
    handler = CliApprovalHandler(console=Console(file=out, width=100), is_tty=lambda: True)
    invoker = ToolInvoker([pay], handler)
    async with invoker.open_session() as session:
        first = await invoker.invoke(call("pay", amount=9), session=session)
        again = await invoker.invoke(call("pay", amount=10), session=session)  # stdin is empty
        assert session.granted("pay")
    assert first.ok and first.approval_id is not None
    assert again.ok and again.approval_id is None  # the session grant: not asked again
    assert "pay wants to run (risk critical)" in out.getvalue()
    assert "{'amount': 9}" in out.getvalue() and "[y/s/n] (n)" in out.getvalue()
    assert RUNS == [9, 10]


async def test_the_cli_prompt_shows_its_choices_as_written(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
    handler = CliApprovalHandler(console=Console(file=out, width=100), is_tty=lambda: True)
    decision = await handler.request(_request())
    assert decision.outcome == "denied"
    assert "Approve? [y]es / [s]ession / [n]o" in out.getvalue()


async def test_the_service_alone_denies_without_a_handler_and_claims_nothing_without_a_store(
) -> None:
    service = ApprovalService()
    decision = await service.decide(_request(), HitlMode.BLOCKING, policy=WaitPolicy())
    assert (decision.outcome, decision.message) == ("denied", "no approval handler is configured")
    claim = await service.claim("apr_x")
    assert (claim.request, claim.refusal, claim.message) == (None, "unknown", "no approval store")
    assert await service.take("apr_x")  # nothing stored: the call's own request


async def test_a_store_without_the_optional_abilities_neither_rejoins_nor_replays(
        tmp_path: Path) -> None:
    inner = SqliteApprovalStore(tmp_path / "a.db")

    class Minimal:
        """Only the ``ApprovalStore`` protocol: no find_open, no replay."""

        def create(self, request: ApprovalRequest) -> None:
            inner.create(request)

        def get(self, request_id: str) -> StoredApproval | None:
            return inner.get(request_id)

        def decide(self, decision: ApprovalDecision) -> bool:
            return inner.decide(decision)

        def claim(self, request_id: str) -> bool:
            return inner.claim(request_id)

        def complete(self, request_id: str, result: Mapping[str, object]) -> None:
            inner.complete(request_id, result)

        def pending(self, session_id: str | None = None) -> list[ApprovalRequest]:
            return inner.pending(session_id)

    service = ApprovalService(store=Minimal())
    request = _request()
    inner.create(request)
    assert await service.find_open(request) is None
    assert inner.find_open(request.session_id, request.tool, request.args_digest) is not None
    assert await service.replay(request.id) is None


def test_store_events_of_one_session_and_the_sqlite_wait(tmp_path: Path) -> None:
    store = SqliteApprovalStore(tmp_path / "a.db")
    mine, theirs = _request("mine"), _request("theirs", amount=2)
    store.create(mine)
    store.create(theirs)
    store.decide(ApprovalDecision(request_id=mine.id, outcome="denied"))
    assert [(rid, state) for _, rid, state in store.events(0, session_id="mine")] == [
        (mine.id, "pending"), (mine.id, "denied")]
    assert [rid for _, rid, _ in store.events(0)] == [mine.id, theirs.id, mine.id]
    started = time.monotonic()
    assert store.wait_for_change(0.05) is False  # SQLite announces nothing: the wait sleeps
    assert time.monotonic() - started >= 0.05
    with pytest.raises(StoreError, match="needs a postgresql:// URL"):
        PostgresApprovalStore(str(tmp_path / "b.db"))


def test_sqlite_errors_are_store_errors_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    db = SqliteFile(path, "CREATE TABLE IF NOT EXISTS t (x INTEGER);")
    with pytest.raises(StoreError, match=f"SQLite store {path}: no such table: nowhere"):
        db.query("SELECT * FROM nowhere")
    with pytest.raises(StoreError, match=f"SQLite store {path}"):
        db.script("CREATE TABLE broken (")
    db.close()
