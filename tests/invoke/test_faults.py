"""Faults: a raising handler, garbage and wrong-shaped results, a broken audit store."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper import StoreError, Tool, tool
from toolkeeper.approval import CallbackApprovalHandler
from toolkeeper.approval.sqlite import SqliteFile
from toolkeeper.invoke import ChainPolicy, ToolInvoker
from toolkeeper.invoke.audit import SqliteAuditLog
from toolkeeper.toolbox import Toolbox

from .helpers import call

pytestmark = pytest.mark.anyio


class Opaque:
    def __repr__(self) -> str:
        return "<opaque thing>"


@tool(risk="critical")
def launch(target: str) -> str:
    """Launch."""
    return "launched"


@tool
def garbage() -> object:
    """Returns something that is not JSON."""
    return Opaque()


@tool
def wrong_shape() -> dict[str, int]:
    """Declares ints, returns text."""
    return {"count": "many"}  # type: ignore[dict-item]


async def test_a_handler_that_raises_yields_one_result_and_a_trace_record() -> None:
    def broken(request: object) -> bool:
        raise ConnectionError("approval service unreachable")

    inv = ToolInvoker(Toolbox([launch]), CallbackApprovalHandler(broken))
    async with inv.open_session() as session:
        result = await inv.invoke(call("launch", target="moon"), session=session)
    assert result.status == "error" and "approval service unreachable" in result.text
    assert [r.status for r in session.trace] == ["error"]


async def test_garbage_and_wrong_shaped_results() -> None:
    inv = ToolInvoker(Toolbox([garbage, wrong_shape]))
    async with inv.open_session() as session:
        odd = await inv.invoke(call("garbage"), session=session)
        wrong = await inv.invoke(call("wrong_shape"), session=session)
    assert odd.ok and "opaque thing" in odd.text
    assert (wrong.status, wrong.error_code) == ("error", "invalid_output")


async def test_namespace_budgets() -> None:
    box = Toolbox()
    box.add(Tool.from_function(lambda: 1, name="one"), namespace="crm")
    box.add(Tool.from_function(lambda: 2, name="two"), namespace="crm")
    inv = ToolInvoker(box, policy=ChainPolicy(namespace_budgets={"crm": 1}))
    async with inv.open_session() as session:
        first = await inv.invoke(call("crm-one"), session=session)
        second = await inv.invoke(call("crm-two"), session=session)
    assert first.ok and second.error_code == "budget_exceeded"
    assert "namespace 'crm'" in second.text


async def test_a_broken_audit_store_reaches_the_host_and_the_trace_keeps_the_call(
        tmp_path: Path) -> None:
    audit = SqliteAuditLog(tmp_path / "audit.db")
    assert isinstance(audit.db, SqliteFile)
    audit.db.close()
    inv = ToolInvoker(Toolbox([garbage]), audit=audit)
    session = inv.open_session()
    with pytest.raises(StoreError):
        await inv.invoke(call("garbage"), session=session)
    assert [r.tool for r in session.trace] == ["garbage"]


def test_an_unwritable_store_location_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="cannot open the SQLite store"):
        SqliteAuditLog(blocker / "sub" / "audit.db")
