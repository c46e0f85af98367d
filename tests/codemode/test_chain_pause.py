"""A script whose call needs a person pauses instead of failing: the run ends ``pending`` with
the request, its journal keeps what the calls before answered, and the same script sent again
by the same client — once a person has decided — answers those calls from the journal, runs
the approved call once and goes on. Real sandbox, real SQLite store."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import anyio
import pytest

from toolkeeper import ToolInvoker, ToolRisk, tool
from toolkeeper.approval import (
    ApprovalDecision,
    CallbackApprovalHandler,
    PersistedApprovalHandler,
    SqliteApprovalStore,
)
from toolkeeper.codemode import ToolChainTool
from toolkeeper.core.call import ToolCall
from toolkeeper.invoke import ChainPolicy
from toolkeeper.invoke.results import InvocationResult
from toolkeeper.policy import Policies
from toolkeeper.toolbox import Toolbox

pytestmark = pytest.mark.anyio
LEDGER: list[str] = []

SCRIPT = """
note(text='a')
note(text='b')
d = deploy(version='v1')
note(text='c')
print('deploy said', d.status, d.text)
result = [d.status, d.text]
"""
ASK_C = """@id("note-c-asks") @ask
permit (principal, action == Action::"note", resource) when { context.args.text == "c" };
"""


@tool
def note(text: str) -> str:
    """Write a note (a side effect)."""
    LEDGER.append(f"note {text}")
    return f"noted {text}"


@tool(risk=ToolRisk.CRITICAL)
def deploy(version: str) -> str:
    """Deploy a version (needs approval)."""
    LEDGER.append(f"deploy {version}")
    return f"deployed {version}"


@tool
def report(size: int) -> str:
    """A long report."""
    return "x" * size


@pytest.fixture(autouse=True)
def ledger() -> Iterator[list[str]]:
    LEDGER.clear()
    yield LEDGER
    LEDGER.clear()


def served(tmp_path: Path, policy: ChainPolicy | None = None
           ) -> tuple[ToolInvoker, SqliteApprovalStore]:
    """One invoker serving the tools and ``tool_chain``, requests in a real SQLite file."""
    store = SqliteApprovalStore(tmp_path / "approvals.db")
    box = Toolbox([note, deploy, report])
    invoker = ToolInvoker(box, approval_handler=PersistedApprovalHandler(store, wait_s=0),
                          approval_store=store)
    box.add(ToolChainTool(invoker, policy=policy))
    return invoker, store


async def run(invoker: ToolInvoker, code: str = SCRIPT, client: str = "client-alice"
              ) -> InvocationResult:
    async with invoker.open_session(session_id=client) as session:
        return await invoker.invoke(ToolCall(id="c1", name="tool_chain",
                                             arguments={"code": code}), session=session)


def decide(store: SqliteApprovalStore, request_id: str, outcome: str, message: str = "") -> None:
    assert store.decide(ApprovalDecision(request_id=request_id, outcome=outcome,
                                         approver="alice", message=message))


def journal_rows(tmp_path: Path) -> int:
    with sqlite3.connect(tmp_path / "approvals.db") as db:
        return int(db.execute("SELECT COUNT(*) FROM approval_runs").fetchone()[0])


async def test_a_script_pauses_at_a_call_that_needs_a_person_and_resumes_once_approved(
        tmp_path: Path, ledger: list[str]) -> None:
    invoker, store = served(tmp_path)
    first = await run(invoker)
    # the run ends pending with the request: nothing after the call ran, and it was not denied
    assert first.status == "pending", first.text
    (request,) = store.requests()
    assert first.approval_id == request.request.id and request.request.tool == "deploy"
    assert "paused at call 3 ('deploy', line 4)" in first.text
    assert "same code" in first.text and request.request.id in first.text
    assert ledger == ["note a", "note b"]
    decide(store, request.request.id, "approved")
    second = await run(invoker)
    assert second.status == "ok", second.text
    # the journaled calls were answered from the journal; the approved call ran once
    assert ledger == ["note a", "note b", "deploy v1", "note c"]
    assert second.result.structured_content == {"status": "ok",
                                                "value": ["ok", "deployed v1"]}
    assert "call 1: note → ok [from the journal: nothing ran]" in second.text
    assert "call 3: deploy → ok\n" in second.text
    assert store.get(request.request.id).state == "done"  # type: ignore[union-attr]
    assert journal_rows(tmp_path) == 0  # a run that ends leaves no journal
    third = await run(invoker)  # the same script again is a new run: its calls run again,
    assert third.status == "ok", third.text  # but the approved one is told, not run twice
    assert ledger.count("deploy v1") == 1 and ledger.count("note a") == 2


async def test_a_denied_call_is_answered_to_the_resumed_script_as_denied(
        tmp_path: Path, ledger: list[str]) -> None:
    invoker, store = served(tmp_path)
    first = await run(invoker)
    assert first.status == "pending" and first.approval_id is not None, first.text
    decide(store, first.approval_id, "denied", "not today")
    second = await run(invoker)
    assert second.status == "ok", second.text
    assert ledger == ["note a", "note b", "note c"]  # deploy never ran, no note twice
    value: Any = second.result.structured_content["value"]  # type: ignore[index]
    assert value[0] == "denied" and "not today" in value[1]


async def test_the_same_script_from_another_client_is_another_run(
        tmp_path: Path, ledger: list[str]) -> None:
    invoker, store = served(tmp_path)
    first = await run(invoker)
    assert first.status == "pending" and first.approval_id is not None
    decide(store, first.approval_id, "approved")
    other = await run(invoker, client="client-bob")
    assert other.status == "pending" and other.approval_id != first.approval_id
    assert ledger == ["note a", "note b", "note a", "note b"]  # bob's calls are his own


async def test_a_script_that_differs_when_run_again_stops_before_any_call_runs_twice(
        tmp_path: Path, ledger: list[str]) -> None:
    invoker, store = served(tmp_path)
    code = ("import os\nnote(text=os.urandom(8).hex())\n"
            "deploy(version='v1')\nnote(text='after')\n")
    first = await run(invoker, code)
    assert first.status == "pending" and first.approval_id is not None, first.text
    decide(store, first.approval_id, "approved")
    second = await run(invoker, code)
    assert second.status == "error" and second.text.startswith("status: error"), second.text
    assert "not deterministic: call 1 is 'note' with other arguments" in second.text
    assert len(ledger) == 1 and ledger[0].startswith("note ")  # nothing ran a second time
    assert store.get(first.approval_id).state == "approved"  # type: ignore[union-attr]
    assert journal_rows(tmp_path) == 1  # kept: the same script may still match


async def test_a_request_that_expired_is_its_own_outcome_and_the_next_run_asks_anew(
        tmp_path: Path, ledger: list[str]) -> None:
    invoker, store = served(tmp_path, ChainPolicy(approval_ttl_s=0.5, approval_timeout_s=0))
    first = await run(invoker)
    assert first.status == "pending" and first.approval_id is not None, first.text
    deadline = time.monotonic() + 20
    while (stored := store.get(first.approval_id)) is not None and stored.state == "pending":
        assert time.monotonic() < deadline, "the request never expired"
        store.settle(first.approval_id)
        await anyio.sleep(0.1)
    second = await run(invoker)
    assert (second.status, second.error_code) == ("error", "expired"), second.text
    assert "expired: nobody decided in time" in second.text and "denied" not in second.text
    assert ledger == ["note a", "note b"]
    third = await run(invoker)  # asks again, the journaled calls still answered from it
    assert third.status == "pending" and third.approval_id not in (None, first.approval_id)
    assert ledger == ["note a", "note b"]


async def test_a_result_too_big_to_journal_says_plainly_that_the_run_cannot_pause(
        tmp_path: Path, ledger: list[str]) -> None:
    invoker, _ = served(tmp_path, ChainPolicy(max_inline_result_bytes=0))
    code = ("r = report(size=1_500_000)\nd = deploy(version='v1')\n"
            "result = [len(r.text), d.status]")
    shown = await run(invoker, code)
    assert shown.status == "ok", shown.text
    shown_value: Any = shown.result.structured_content["value"]  # type: ignore[index]
    length, status = shown_value
    assert length >= 1_500_000 and status == "pending"  # the script went on, told 'pending'
    assert "could not pause at call 2 ('deploy')" in shown.text
    assert "call 1 ('report', 1,500," in shown.text and "over what a journal keeps" in shown.text
    assert journal_rows(tmp_path) == 0


async def test_a_run_that_never_asks_writes_no_journal(tmp_path: Path,
                                                       ledger: list[str]) -> None:
    invoker, _ = served(tmp_path)
    shown = await run(invoker, "note(text='a')\nresult = note(text='b').text")
    assert shown.status == "ok" and ledger == ["note a", "note b"]
    assert journal_rows(tmp_path) == 0


async def test_without_a_store_a_slow_person_is_an_expiry_the_script_reads(
        ledger: list[str]) -> None:
    async def never(_request: object) -> bool:
        await anyio.sleep(60)
        return True

    invoker = ToolInvoker([note, deploy], approval_handler=CallbackApprovalHandler(never))
    chain = ToolChainTool(invoker, policy=ChainPolicy(call_timeout_s=3, approval_timeout_s=0.3))
    shown = await chain.run_chain(SCRIPT, session_id="client-alice")
    assert shown.status == "ok", shown.output_text
    status, text = cast(Any, shown.value)[0], cast(Any, shown.value)[1]
    assert status == "error" and "nobody decided within 0.3 s; it did not run" in text, text
    assert ledger == ["note a", "note b", "note c"]


async def test_a_safe_call_an_ask_policy_holds_pauses_the_run_with_its_journal(
        tmp_path: Path, ledger: list[str]) -> None:
    store = SqliteApprovalStore(tmp_path / "approvals.db")
    box = Toolbox([note, deploy, report])
    invoker = ToolInvoker(box, approval_handler=PersistedApprovalHandler(store, wait_s=0),
                          approval_store=store, policies=Policies(box, text={"team": ASK_C}))
    box.add(ToolChainTool(invoker))
    code = "note(text='a')\nnote(text='b')\nnote(text='c')\nresult = 'done'\n"
    first = await run(invoker, code)
    assert first.status == "pending" and first.approval_id is not None, first.text
    assert "paused at call 3 ('note', line 3)" in first.text
    assert ledger == ["note a", "note b"]
    decide(store, first.approval_id, "approved")
    second = await run(invoker, code)
    assert second.status == "ok", second.text
    assert ledger == ["note a", "note b", "note c"]  # the two before it ran once each


async def test_under_policies_the_journal_is_stored_before_a_call_goes_to_be_asked(
        tmp_path: Path, ledger: list[str]) -> None:
    # a server killed while the call waits must find what the calls before it answered
    seen: list[int] = []

    def person(_request: object) -> bool:
        with sqlite3.connect(tmp_path / "approvals.db") as db:
            seen.append(int(db.execute("SELECT COUNT(*) FROM approval_journal").fetchone()[0]))
        return True

    store = SqliteApprovalStore(tmp_path / "approvals.db")
    box = Toolbox([note, deploy, report])
    invoker = ToolInvoker(box, approval_handler=CallbackApprovalHandler(person),
                          approval_store=store, policies=Policies(box, text={"team": ASK_C}))
    box.add(ToolChainTool(invoker))
    shown = await run(invoker, "note(text='a')\nnote(text='b')\nresult = note(text='c').text")
    assert shown.status == "ok", shown.text
    assert seen == [2] and ledger == ["note a", "note b", "note c"]
    assert journal_rows(tmp_path) == 0  # the run ended: its journal went


async def test_a_search_before_the_calls_does_not_shift_the_replay(
        tmp_path: Path, ledger: list[str]) -> None:
    # a search is numbered with the calls but not journaled: the replay must not lose its place
    invoker, store = served(tmp_path)
    code = "search_tools('note')\n" + SCRIPT
    first = await run(invoker, code)
    assert first.status == "pending" and first.approval_id is not None, first.text
    assert "paused at call 4 ('deploy', line 5)" in first.text
    decide(store, first.approval_id, "approved")
    second = await run(invoker, code)
    assert second.status == "ok", second.text
    assert ledger == ["note a", "note b", "deploy v1", "note c"]



async def test_a_run_cut_by_its_time_limit_while_a_call_waits_keeps_its_journal(
        tmp_path: Path, ledger: list[str]) -> None:
    # the request outlives the run: once approved, the same script must not redo what ran
    store = SqliteApprovalStore(tmp_path / "approvals.db")
    box = Toolbox([note, deploy, report])
    invoker = ToolInvoker(box, approval_handler=PersistedApprovalHandler(store, wait_s=120),
                          approval_store=store)
    box.add(ToolChainTool(invoker, policy=ChainPolicy(
        total_timeout_s=20, call_timeout_s=150, approval_timeout_s=120)))
    first = await run(invoker)
    assert first.status == "error" and "status: timeout" in first.text, first.text
    assert ledger == ["note a", "note b"], first.text  # it reached the call that waits
    assert "sent again unchanged" in first.text  # the model is told the journal is kept
    (request,) = store.requests()
    decide(store, request.request.id, "approved")
    second = await run(invoker)
    assert second.status == "ok", second.text
    assert ledger == ["note a", "note b", "deploy v1", "note c"]


async def test_a_request_past_its_expiry_that_nothing_settled_yet_is_expired_too(
        tmp_path: Path, ledger: list[str]) -> None:
    invoker, store = served(tmp_path, ChainPolicy(approval_ttl_s=0.5, approval_timeout_s=0))
    first = await run(invoker)
    assert first.status == "pending" and first.approval_id is not None, first.text
    stored = store.get(first.approval_id)
    assert stored is not None and stored.request.expires_at is not None
    deadline = time.monotonic() + 20
    while time.time() <= stored.request.expires_at:  # past its expiry; nobody settled it
        assert time.monotonic() < deadline, "the request's expiry never passed"
        await anyio.sleep(0.1)
    second = await run(invoker)
    assert (second.status, second.error_code) == ("error", "expired"), second.text
    assert ledger == ["note a", "note b"]


async def test_a_call_whose_arguments_hold_a_lone_surrogate_is_refused_and_audited_and_the_run_goes_on(
        tmp_path: Path, ledger: list[str]) -> None:
    # a script's string with a lone surrogate reaches the host as a \\udXXX escape; with a
    # journal (as under serve) its digest was taken first and ended the run ("the bridge
    # closed"), with no audit row for the call
    invoker, _ = served(tmp_path)
    assert invoker.audit is not None  # beside the approval store, as under serve
    result = await run(invoker, "a = note(text='x \\ud800 y')\nnote(text='after')\n"
                                "result = [a.status, a.text]")
    assert result.status == "ok", result.text
    value: Any = result.result.structured_content["value"]  # type: ignore[index]
    assert value[0] == "error" and "cannot be recorded in the audit log" in value[1]
    assert ledger == ["note after"]
    rows = {(e.call_id, e.tool, e.status, e.error_code)
            for e in invoker.audit.query(limit=10)}
    assert ("chain-1", "note", "error", "invalid_arguments") in rows
    assert ("chain-2", "note", "ok", None) in rows
