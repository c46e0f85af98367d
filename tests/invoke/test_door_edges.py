"""The door's less-travelled paths, each through ``ToolInvoker.invoke`` (or ``resume``): what
the caller gets back when a tool reports its own error, an argument points at an artifact no
store holds, a guardrail redacts or trips, a progress sink is a coroutine, a grant has ended,
and an approved call is resumed with other arguments or without a store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from toolkeeper import ToolResult, tool
from toolkeeper.approval import AutoApprovalHandler, PersistedApprovalHandler, SqliteApprovalStore
from toolkeeper.artifacts.store import MemoryBlobStore
from toolkeeper.errors import StoreError, UsageError
from toolkeeper.guardrails.base import GuardrailOutcome, passed, redact, trip
from toolkeeper.hooks import HookEvent, HookManager
from toolkeeper.invoke import ChainPolicy, ToolInvoker
from toolkeeper.invoke.audit import PostgresAuditLog, SqliteAuditLog, redact_arguments
from toolkeeper.invoke.results import ChainCallRecord

from .helpers import call

pytestmark = pytest.mark.anyio
SEEN: list[dict[str, Any]] = []


@tool
def soft_fail(reason: str) -> ToolResult:
    """Report a failure as a result, without a code of its own."""
    return ToolResult(content=[{"type": "text", "text": f"could not: {reason}"}], is_error=True)


@tool
def echo(text: str) -> str:
    """Echo the text."""
    SEEN.append({"text": text})
    return text


@tool
def picture() -> ToolResult:
    """Return a small PNG."""
    return ToolResult(content=[{"type": "image", "data": "iVBORw0KGgo=", "media_type": "image/png"}])


@tool(risk="critical")
def transfer(amount: int) -> str:
    """Move money."""
    SEEN.append({"amount": amount})
    return f"moved {amount}"


class _Rail:
    """A guardrail that redacts secrets on the way in and trips on 'forbidden' on the way out."""

    name = "house_rules"

    async def check_input(self, tool: Any, arguments: dict[str, Any]) -> GuardrailOutcome:
        if "secret" in str(arguments.get("text", "")):
            return redact({**arguments, "text": "[masked]"}, "a secret")
        return passed()

    async def check_output(self, tool: Any, result: Any) -> GuardrailOutcome:
        return trip("the answer breaks a house rule") if "forbidden" in result.text else passed()


async def test_a_tool_that_reports_its_own_error_gets_the_generic_code_and_status_error() -> None:
    invoker = ToolInvoker([soft_fail])
    async with invoker.open_session() as session:
        result = await invoker.invoke(call("soft_fail", reason="disk full"), session=session)
    assert (result.status, result.error_code, result.ran) == ("error", "tool_error", True)
    assert result.text == "could not: disk full"
    # what a provider message is rendered from carries the code too
    assert result.to_tool_result().error_code == "tool_error"
    (record,) = session.trace
    assert (record.status, record.error_code) == ("error", "tool_error")
    assert "tool='soft_fail'" in repr(record) and "status='error'" in repr(record)


async def test_an_artifact_ref_without_a_store_is_an_invalid_argument_and_nothing_runs() -> None:
    SEEN.clear()
    invoker = ToolInvoker([echo])
    async with invoker.open_session() as session:
        result = await invoker.invoke(call("echo", text={"$artifact": "art_missing"}),
                                      session=session)
    assert (result.status, result.error_code, result.ran) == ("error", "invalid_arguments", False)
    assert "no artifact store is configured" in result.text and "art_missing" in result.text
    assert SEEN == []


async def test_an_input_guardrail_redacts_what_the_tool_sees_and_an_output_one_trips() -> None:
    SEEN.clear()
    hooks = HookManager()
    tripped: list[dict[str, Any]] = []
    hooks.register(HookEvent.GUARDRAIL_TRIPPED, lambda event, payload: tripped.append(payload))
    invoker = ToolInvoker([echo], guardrails=[_Rail()], hooks=hooks)
    async with invoker.open_session() as session:
        masked = await invoker.invoke(call("echo", text="my secret is 42"), session=session)
        refused = await invoker.invoke(call("echo", text="a forbidden word"), session=session)
    assert (masked.status, masked.text) == ("ok", "[masked]")
    assert SEEN[0] == {"text": "[masked]"}  # the tool never saw the secret
    # the output guardrail runs after the tool: it ran, but the model is not shown the answer
    assert SEEN[1] == {"text": "a forbidden word"}
    assert (refused.status, refused.error_code) == ("denied", "guardrail_tripped")
    assert refused.text == ("guardrail 'house_rules' refused the call to 'echo': the answer "
                            "breaks a house rule")  # the tool's answer is not shown
    assert len(tripped) == 1


async def test_an_async_progress_sink_is_awaited_for_the_call_and_its_result() -> None:
    steps: list[dict[str, Any]] = []

    async def sink(step: dict[str, Any]) -> None:
        steps.append(step)

    invoker = ToolInvoker([echo])
    async with invoker.open_session() as session:
        result = await invoker.invoke(call("echo", text="hi"), session=session,
                                      progress_sink=sink)
    assert result.ok
    assert [(s["type"], s.get("status")) for s in steps] == [("tool_call", None),
                                                            ("tool_result", "ok")]
    assert {s["call_id"] for s in steps} == {result.call_id}


async def test_short_text_passes_a_result_cap_untouched_and_media_is_stored_with_a_hook() -> None:
    store = MemoryBlobStore()
    hooks = HookManager()
    stored: list[dict[str, Any]] = []
    hooks.register(HookEvent.ARTIFACT_STORED, lambda event, payload: stored.append(payload))
    capped = ToolInvoker([echo], policy=ChainPolicy(max_result_size=50))
    with_store = ToolInvoker([picture], artifact_store=store, hooks=hooks)
    async with capped.open_session() as session:
        short = await capped.invoke(call("echo", text="short"), session=session)
    async with with_store.open_session() as session:
        media = await with_store.invoke(call("picture"), session=session)
        assert session.pinned_refs == (media.files[0].artifact_ref,)
    assert short.text == "short" and "truncated" not in short.text
    (file,) = media.files
    assert (file.path, file.media_type, file.size) == ("media/picture_0.png", "image/png", 8)
    assert stored == [{"tool": "picture", "tool_name": "picture", "ref": file.artifact_ref,
                       "size": 8}]


async def test_a_grant_that_has_ended_asks_again() -> None:
    asked: list[str] = []

    def rule(request: Any) -> bool:
        asked.append(request.tool)
        return True

    invoker = ToolInvoker([transfer], AutoApprovalHandler(rule=rule))
    async with invoker.open_session() as session:
        session.grant("transfer", 3600)
        assert session.granted("transfer")
        first = await invoker.invoke(call("transfer", amount=1), session=session)
        session.grant("transfer", 0)  # ended at once
        assert not session.granted("transfer")
        assert "transfer" not in session.grants  # an ended grant is dropped
        second = await invoker.invoke(call("transfer", amount=2), session=session)
    assert first.ok and first.approval_id is None  # the grant let it through without asking
    assert second.ok and second.approval_id is not None
    assert asked == ["transfer"]


async def test_resume_without_an_approval_store_is_a_usage_error() -> None:
    invoker = ToolInvoker([transfer], AutoApprovalHandler())
    async with invoker.open_session() as session:
        with pytest.raises(UsageError, match="resume needs an approval store"):
            await invoker.resume("apr_x", session=session)


async def test_resume_of_an_unknown_request_is_an_error_result(tmp_path: Path) -> None:
    store = SqliteApprovalStore(tmp_path / "u.db")
    invoker = ToolInvoker([transfer], PersistedApprovalHandler(store))
    async with invoker.open_session() as session:
        result = await invoker.resume("apr_nobody", session=session)
    assert (result.status, result.error_code, result.approval_id) == (
        "error", "unknown_approval", "apr_nobody")
    assert "no approval request 'apr_nobody'" in result.text


async def test_resume_with_other_arguments_is_refused_and_audited(tmp_path: Path) -> None:
    from toolkeeper.approval import ApprovalDecision

    SEEN.clear()
    store = SqliteApprovalStore(tmp_path / "a.db")
    audit = SqliteAuditLog(tmp_path / "a.db")
    invoker = ToolInvoker([transfer], PersistedApprovalHandler(store, wait_s=0), audit=audit)
    async with invoker.open_session() as session:
        pending = await invoker.invoke(call("transfer", amount=5), session=session)
        assert pending.status == "pending" and pending.approval_id
        store.decide(ApprovalDecision(request_id=pending.approval_id, outcome="approved",
                                      approver="alice"))
        refused = await invoker.resume(pending.approval_id, session=session,
                                       arguments={"amount": 5000})
    assert (refused.status, refused.error_code) == ("denied", "policy_violation")
    assert SEEN == []
    row = audit.query(status="denied")[0]
    assert (row.tool, row.approval_id, row.arguments) == ("transfer", pending.approval_id,
                                                         {"amount": 5000})
    assert row.decision is not None and "arguments differ" in row.decision
    assert store.get(pending.approval_id).state == "approved"  # type: ignore[union-attr]


def test_the_audit_log_keeps_no_bytes_and_a_postgres_log_needs_a_url(tmp_path: Path) -> None:
    assert redact_arguments({"blob": b"\x00" * 10, "items": ("a", b"xy")}) == {
        "blob": "<10 bytes>", "items": ["a", "<2 bytes>"]}
    with pytest.raises(StoreError, match="needs a postgresql:// URL"):
        PostgresAuditLog(str(tmp_path / "audit.db"))


def test_a_policy_error_that_is_not_ours_stays_a_validation_error() -> None:
    with pytest.raises(ValidationError, match="max_tool_calls"):
        ChainPolicy(max_tool_calls=-1)
    with pytest.raises(ValidationError, match="truncation"):
        ChainPolicy(truncation="middle")


def test_a_trace_record_computes_its_digest_from_the_arguments_once() -> None:
    record = ChainCallRecord(tool="t", call_id="c", status="ok", duration_ms=1.0,
                             arguments={"b": 1, "a": 2})
    same = ChainCallRecord(tool="t", call_id="d", status="ok", duration_ms=1.0,
                           arguments={"a": 2, "b": 1})
    given = ChainCallRecord(tool="t", call_id="e", status="ok", duration_ms=1.0,
                            args_digest="fixed")
    assert record.args_digest == same.args_digest and len(record.args_digest) == 64
    assert given.args_digest == "fixed"
