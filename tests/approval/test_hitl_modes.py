"""The HITL modes do what they say whatever the handler's own wait, requests expire on their
own time-to-live, and the default ceiling follows the session kind (an ordinary session lets a
SENSITIVE tool run; a code-mode chain asks)."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from toolkeeper import HitlMode, ToolRisk, tool
from toolkeeper.approval import PersistedApprovalHandler, SqliteApprovalStore
from toolkeeper.approval.models import ApprovalDecision
from toolkeeper.invoke import ChainPolicy, ToolInvoker
from toolkeeper.server.decide import DecisionError, decide

from ..invoke.helpers import call

pytestmark = pytest.mark.anyio

RAN: list[str] = []


@tool(risk=ToolRisk.HIGH, hitl_mode=HitlMode.CONTINUE_ON_TIMEOUT)
def restart(service: str) -> str:
    """Restart a service."""
    RAN.append(f"restart {service}")
    return f"restarted {service}"


@tool(risk=ToolRisk.HIGH, hitl_mode=HitlMode.FIRE_AND_CONTINUE)
def notify(text: str) -> str:
    """Notify the team."""
    RAN.append(f"notify {text}")
    return "sent"


@tool(risk=ToolRisk.CRITICAL)
def wipe(disk: str) -> str:
    """Wipe a disk."""
    RAN.append(f"wipe {disk}")
    return "wiped"


@tool(risk=ToolRisk.SENSITIVE)
def lookup(query: str) -> str:
    """Look something up on the network."""
    return f"found {query}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def _invoker(store: SqliteApprovalStore, *, wait_s: float, **policy: float) -> ToolInvoker:
    return ToolInvoker([restart, notify, wipe, lookup],
                       PersistedApprovalHandler(store, wait_s=wait_s, poll_s=0.01),
                       policy=ChainPolicy(**policy))


@pytest.mark.parametrize("handler_wait", [0.05, 0.3])  # shorter than, and equal to, the mode's
async def test_continue_on_timeout_approves_at_its_time_whatever_the_handlers_wait(
        tmp_path: Path, handler_wait: float) -> None:
    store = SqliteApprovalStore(tmp_path / "a.db")
    invoker = _invoker(store, wait_s=handler_wait, hitl_timeout_seconds=0.3)
    async with invoker.open_session() as session:
        result = await invoker.invoke(call("restart", service="web"), session=session)
    assert result.ok and RAN == ["restart web"]
    (stored,) = store.requests()
    assert stored.state == "done" and stored.decision is not None
    assert stored.decision.approver == "timeout"


async def test_continue_on_timeout_left_unwaited_is_approved_at_its_time_and_runs_once(
        tmp_path: Path) -> None:
    store = SqliteApprovalStore(tmp_path / "a.db")
    invoker = _invoker(store, wait_s=30, hitl_timeout_seconds=0.3)
    async with invoker.open_session(session_id="client-a") as session:
        with anyio.move_on_after(0.05):  # the client gave up
            await invoker.invoke(call("restart", service="db"), session=session)
        assert RAN == [] and store.requests()[0].state == "pending"
        await anyio.sleep(0.35)
        assert store.requests()[0].decision.approver == "timeout"  # type: ignore[union-attr]
        again = await invoker.invoke(call("restart", service="db"), session=session)
    assert again.ok and RAN == ["restart db"]
    assert [s.state for s in store.requests()] == ["done"]


async def test_fire_and_continue_runs_without_a_handler_and_is_announced_in_the_store(
        tmp_path: Path) -> None:
    bare = ToolInvoker([notify])
    async with bare.open_session() as session:
        assert (await bare.invoke(call("notify", text="hi"), session=session)).ok
    store = SqliteApprovalStore(tmp_path / "a.db")
    announced = ToolInvoker([notify], approval_store=store)
    async with announced.open_session() as session:
        result = await announced.invoke(call("notify", text="deploy"), session=session)
    assert result.ok and RAN == ["notify hi", "notify deploy"]
    (stored,) = store.requests()
    assert stored.state == "done" and stored.decision is not None
    assert stored.decision.approver == "fire_and_continue"
    assert "without waiting" in stored.decision.message


async def test_a_request_past_its_time_to_live_leaves_the_inbox_and_cannot_be_approved(
        tmp_path: Path) -> None:
    store = SqliteApprovalStore(tmp_path / "a.db")
    invoker = _invoker(store, wait_s=0, approval_ttl_s=0.2)
    async with invoker.open_session(session_id="client-a") as session:
        first = await invoker.invoke(call("wipe", disk="sda"), session=session)
        assert first.status == "pending"
        assert "Call the same tool again with the same arguments" in first.text
        assert "resume" not in first.text
        assert [s.request.id for s in store.requests(state="pending")] == [first.approval_id]
        await anyio.sleep(0.25)
        assert store.requests(state="pending") == []
        assert store.requests()[0].state == "expired"  # in the history
        with pytest.raises(DecisionError, match="expired") as refused:
            await decide(store, None, "operator", str(first.approval_id), "approve")
        assert refused.value.code == "expired"
        again = await invoker.invoke(call("wipe", disk="sda"), session=session)
    assert again.status == "pending" and again.approval_id != first.approval_id
    assert RAN == []


async def test_a_decision_made_in_time_still_applies(tmp_path: Path) -> None:
    store = SqliteApprovalStore(tmp_path / "a.db")
    invoker = _invoker(store, wait_s=0, approval_ttl_s=30)
    async with invoker.open_session(session_id="client-a") as session:
        first = await invoker.invoke(call("wipe", disk="sdb"), session=session)
        assert store.decide(ApprovalDecision(request_id=str(first.approval_id),
                                             outcome="approved", approver="web:operator"))
        again = await invoker.invoke(call("wipe", disk="sdb"), session=session)
    assert again.ok and RAN == ["wipe sdb"]
    assert time.time() < store.requests()[0].request.expires_at  # type: ignore[operator]


async def test_a_sensitive_tool_asks_in_a_chain_but_not_in_an_ordinary_session(
        tmp_path: Path) -> None:
    invoker = ToolInvoker([lookup])  # no handler: asking would be denied
    async with invoker.open_session() as session:
        ordinary = await invoker.invoke(call("lookup", query="x"), session=session)
    async with invoker.open_session(chain=True) as session:
        chained = await invoker.invoke(call("lookup", query="x"), session=session)
    strict = ToolInvoker([lookup], policy=ChainPolicy(max_risk_unapproved=ToolRisk.SAFE))
    async with strict.open_session() as session:
        asked = await strict.invoke(call("lookup", query="x"), session=session)
    assert ordinary.ok and ordinary.text == "found x"
    assert chained.status == "denied" and asked.status == "denied"
