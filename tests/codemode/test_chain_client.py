"""A script's calls belong to the client that ran ``tool_chain``: its audit rows and approval
requests carry that client's session id, while the run keeps its own budget, trace and pins."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper import ToolInvoker, ToolRisk, tool
from toolkeeper.approval import PersistedApprovalHandler, SqliteApprovalStore
from toolkeeper.artifacts import MemoryBlobStore
from toolkeeper.codemode import ToolChainTool
from toolkeeper.core.call import ToolCall
from toolkeeper.invoke import ChainPolicy
from toolkeeper.invoke.audit import SqliteAuditLog
from toolkeeper.toolbox import Toolbox

pytestmark = pytest.mark.anyio


@tool
def word_count(text: str) -> int:
    """Count words."""
    return len(text.split())


@tool(risk=ToolRisk.CRITICAL)
def deploy(version: str) -> str:
    """Deploy a version (needs approval)."""
    return f"deployed {version}"


@tool
def report(size: int) -> str:
    """A long report."""
    return "line of the report\n" * size


def served(tmp_path: Path, **chain: object) -> tuple[ToolInvoker, SqliteAuditLog,
                                                      SqliteApprovalStore]:
    """One invoker serving the tools and ``tool_chain`` itself, as ``toolkeeper serve`` does."""
    audit = SqliteAuditLog(tmp_path / "audit.db")
    store = SqliteApprovalStore(tmp_path / "approvals.db")
    box = Toolbox([word_count, deploy, report])
    invoker = ToolInvoker(box, approval_handler=PersistedApprovalHandler(store, wait_s=0),
                          approval_store=store, audit=audit, artifact_store=MemoryBlobStore())
    box.add(ToolChainTool(invoker, **chain))  # type: ignore[arg-type]
    return invoker, audit, store


async def test_a_scripts_calls_are_recorded_under_the_client_that_ran_it(tmp_path: Path) -> None:
    invoker, audit, store = served(tmp_path)
    async with invoker.open_session(session_id="client-alice") as session:
        result = await invoker.invoke(ToolCall(id="c1", name="tool_chain", arguments={
            "code": "word_count(text='a b')\nresult = deploy(version='v1').status"}),
            session=session)
    assert result.status == "pending", result.text  # the run paused at deploy
    rows = sorted((e.tool, e.status, e.session_id) for e in audit.query(limit=10))
    assert rows == [("deploy", "pending", "client-alice"),
                    ("tool_chain", "pending", "client-alice"),
                    ("word_count", "ok", "client-alice")]
    (request,) = store.requests()
    assert (request.request.tool, request.request.session_id) == ("deploy", "client-alice")
    assert len(store.requests(session_id="client-alice")) == 1  # the client's own view


async def test_a_run_keeps_its_own_budget_and_trace_under_the_clients_id(tmp_path: Path) -> None:
    invoker, _, _ = served(tmp_path, policy=ChainPolicy(max_tool_calls=2))
    async with invoker.open_session(session_id="client-bob") as session:
        result = await invoker.invoke(ToolCall(id="c1", name="tool_chain", arguments={
            "code": "result = [word_count(text=str(i)).status for i in range(3)]"}),
            session=session)
        assert session.call_count == 1  # the client's own session counted tool_chain only
    assert not result.ok and "whole budget of 2 tool calls" in result.text  # the run ended
    assert "call 3: word_count → error (budget_exceeded)" in result.text


async def test_a_run_ending_does_not_unpin_what_its_client_pinned(tmp_path: Path) -> None:
    invoker, _, _ = served(tmp_path)
    store = invoker.artifact_store
    assert isinstance(store, MemoryBlobStore)
    async with invoker.open_session(session_id="client-carol") as session:
        direct = await invoker.invoke(ToolCall(id="c1", name="report", arguments={"size": 5000}),
                                      session=session)
        ref = direct.artifact_ref
        assert ref is not None and store.pinned(ref)
        chained = await invoker.invoke(ToolCall(id="c2", name="tool_chain", arguments={
            "code": "result = report(size=5000).artifact_ref"}), session=session)
        assert chained.structured == {"status": "ok", "value": ref}  # the same blob
        assert store.pinned(ref)  # the script's session ended; the client's pin holds
    assert not store.pinned(ref)
