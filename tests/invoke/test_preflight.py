"""The pre-flight gate: a call that its tool's own check refuses is refused before a person is
asked — with the tool's own error, no approval request, an audit row and a span that name the
gate — and a check that breaks refuses the call with an error naming the tool."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolkeeper import BaseTool, PolicyViolationError, ToolRisk, tool
from toolkeeper.approval import PersistedApprovalHandler, SqliteApprovalStore
from toolkeeper.invoke import ChainPolicy, ToolInvoker
from toolkeeper.invoke.gates import preflight as gate

from .helpers import call

pytestmark = pytest.mark.anyio

CHECKED: list[tuple[dict[str, Any], bool]] = []


def no_production(service: str, drain: bool) -> None:
    CHECKED.append(({"service": service, "drain": drain},
                    threading.current_thread() is threading.main_thread()))
    if service == "production":
        raise PolicyViolationError(
            "restarting 'production' is refused (rule ops.protected_services); restart it "
            "from the runbook instead", tool_name="restart", details={"rule": "protected"})


@tool(risk=ToolRisk.HIGH, preflight=no_production)
def restart(service: str, drain: bool = False) -> str:
    """Restart a service."""
    no_production(service, drain)
    return f"restarted {service}"


def _broken(service: str) -> None:
    raise KeyError("inventory")


@tool(risk=ToolRisk.HIGH, preflight=_broken)
def deploy(service: str) -> str:
    """Deploy a service."""
    return f"deployed {service}"


class Wire(BaseTool):
    """Wire money."""

    risk = ToolRisk.CRITICAL

    async def preflight(self, *, amount: int, to: str) -> None:
        if amount > 1000:
            raise PolicyViolationError(f"{amount} is over the 1000 limit (rule payments.limit)",
                                       tool_name="wire")

    async def execute(self, *, amount: int, to: str) -> str:  # type: ignore[override]
        await self.preflight(amount=amount, to=to)
        return f"wired {amount} to {to}"


def _served(tmp_path: Path, *tools: Any) -> tuple[ToolInvoker, SqliteApprovalStore]:
    store = SqliteApprovalStore(tmp_path / "approvals.db")
    handler = PersistedApprovalHandler(store, wait_s=0)  # a person never answers here
    return ToolInvoker(list(tools), handler), store


async def test_a_call_the_tool_refuses_is_refused_before_anyone_is_asked(tmp_path: Path) -> None:
    invoker, store = _served(tmp_path, restart)
    CHECKED.clear()
    async with invoker.open_session() as session:
        refused = await invoker.invoke(call("restart", service="production"), session=session)
        asked = await invoker.invoke(call("restart", service="web"), session=session)
    assert (refused.status, refused.error_code, refused.ran) == ("denied", "policy_violation",
                                                                 False)
    assert refused.text.startswith("restarting 'production' is refused (rule ")
    assert refused.refused_by == "preflight" and refused.approval_id is None
    assert asked.status == "pending"  # a call the rules let through still asks a person
    assert [(s.request.tool, s.request.arguments) for s in store.requests()] == [
        ("restart", {"service": "web", "drain": False})]
    # the check got the validated arguments, defaults filled, off the event loop's thread
    assert CHECKED == [({"service": "production", "drain": False}, False),
                       ({"service": "web", "drain": False}, False)]


async def test_the_refusal_reads_the_same_with_or_without_pre_flight() -> None:
    checked = ToolInvoker([restart])
    unchecked = ToolInvoker([restart], policy=ChainPolicy(unapproved_tools=frozenset({"restart"})),
                            gates=[g for g in checked.gates if g.name != "preflight"])
    async with checked.open_session() as one, unchecked.open_session() as other:
        early = await checked.invoke(call("restart", service="production"), session=one)
        late = await unchecked.invoke(call("restart", service="production"), session=other)
    assert (early.error_code, early.text) == (late.error_code, late.text)
    assert early.refused_by == "preflight" and late.refused_by is None


async def test_the_audit_row_and_the_span_name_the_pre_flight_gate(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    store = SqliteApprovalStore(tmp_path / "approvals.db")
    invoker = ToolInvoker([restart], PersistedApprovalHandler(store, wait_s=0),
                          tracer_provider=provider)
    async with invoker.open_session() as session:
        await invoker.invoke(call("restart", service="production"), session=session)
    assert invoker.audit is not None
    [row] = invoker.audit.query()
    assert (row.status, row.error_code, row.decision, row.approval_id) == (
        "denied", "policy_violation", "refused by preflight", None)
    (span,) = exporter.get_finished_spans()
    assert span.attributes is not None and span.attributes["toolkeeper.gate"] == "preflight"
    assert [e.name for e in span.events] == ["toolkeeper.refused"]
    assert "production" not in str(dict(span.attributes))  # names and codes, not arguments


async def test_a_check_that_breaks_is_an_error_naming_the_tool_and_nothing_is_asked(
        tmp_path: Path) -> None:
    invoker, store = _served(tmp_path, deploy)
    async with invoker.open_session() as session:
        result = await invoker.invoke(call("deploy", service="web"), session=session)
    assert (result.status, result.error_code, result.ran) == ("error", "did_not_run", False)
    assert result.text.startswith("the pre-flight check of tool 'deploy' failed (KeyError: "
                                  "'inventory'), so the call was refused and nothing ran")
    assert "Traceback" not in result.text and store.requests() == []


async def test_a_check_that_does_not_finish_refuses_the_call(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gate, "PREFLIGHT_S", 0.2)
    never = anyio.Event()

    async def hangs(service: str, drain: bool) -> None:
        await never.wait()

    stuck = restart.replace(name="stuck", preflight=hangs)
    invoker, store = _served(tmp_path, stuck)
    async with invoker.open_session() as session:
        with anyio.fail_after(30):
            result = await invoker.invoke(call("stuck", service="web"), session=session)
    assert result.error_code == "did_not_run" and "'stuck' did not finish within 0.2 s" in \
        result.text
    assert store.requests() == []


async def test_a_base_tool_declares_its_check_as_a_method(tmp_path: Path) -> None:
    invoker, store = _served(tmp_path, Wire())
    async with invoker.open_session() as session:
        over = await invoker.invoke(call("wire", amount=5000, to="acme"), session=session)
        under = await invoker.invoke(call("wire", amount=50, to="acme"), session=session)
    assert over.status == "denied" and over.text == "5000 is over the 1000 limit (rule " \
        "payments.limit)"
    assert under.status == "pending" and len(store.requests()) == 1


def test_a_tool_without_a_check_skips_the_gate() -> None:
    invoker = ToolInvoker([restart, deploy.replace(name="plain", preflight=None)])
    needed = {t.name: [g.name for g in invoker.gates if g.needed(t)]
              for t in invoker.registry.all()}
    assert "preflight" in needed["restart"] and "preflight" not in needed["plain"]
