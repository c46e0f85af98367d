"""Nothing runs unrecorded: arguments that nest too deep, hold too much or cannot be written to
the audit log are refused at the door (``invalid_arguments`` naming the bound) before the tool
runs, and the refusal itself has its audit row (a real SQLite file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper import tool
from toolkeeper.invoke import ChainPolicy, ToolCall, ToolInvoker
from toolkeeper.invoke.audit import SqliteAuditLog
from toolkeeper.toolbox import Toolbox

pytestmark = pytest.mark.anyio

RAN: list[object] = []


@tool
async def take(data: object) -> str:
    """Take any JSON value."""
    RAN.append(data)
    return "taken"


def _nested(lists: int) -> object:
    value: object = "x"
    for _ in range(lists):
        value = [value]
    return value


async def _call(tmp_path: Path, arguments: dict[str, object],
                policy: ChainPolicy | None = None) -> tuple[str, str | None, str, list[str]]:
    RAN.clear()
    audit = SqliteAuditLog(tmp_path / "toolkeeper.db")
    invoker = ToolInvoker(Toolbox([take]), audit=audit, policy=policy)
    async with invoker.open_session() as session:
        result = await invoker.invoke(ToolCall(id="c1", name="take", arguments=arguments),
                                      session=session)
    audit.close()
    rows = [f"{e.tool}:{e.status}:{e.error_code}" for e in
            SqliteAuditLog(tmp_path / "toolkeeper.db").query()]
    return result.status, result.error_code, result.text, rows


async def test_arguments_nesting_900_levels_are_refused_before_the_tool_runs(
        tmp_path: Path) -> None:
    status, code, text, rows = await _call(tmp_path, {"data": _nested(900)})
    assert (status, code) == ("error", "invalid_arguments")
    assert "deeper than 64 levels" in text and "max_argument_depth" in text
    assert RAN == []
    assert rows == ["take:error:invalid_arguments"]  # the refusal is recorded


async def test_nesting_up_to_the_bound_runs_and_is_recorded(tmp_path: Path) -> None:
    status, code, _, rows = await _call(tmp_path, {"data": _nested(63)})  # 64 levels with the object
    assert (status, code) == ("ok", None)
    assert len(RAN) == 1
    assert rows == ["take:ok:None"]
    status, code, _, _ = await _call(tmp_path, {"data": _nested(64)})
    assert (status, code) == ("error", "invalid_arguments") and RAN == []


async def test_the_bounds_come_from_the_policy(tmp_path: Path) -> None:
    policy = ChainPolicy(max_argument_depth=3, max_argument_items=10)
    status, code, text, _ = await _call(tmp_path, {"data": [[[1]]]}, policy)
    assert (status, code) == ("error", "invalid_arguments") and "deeper than 3" in text
    status, code, text, _ = await _call(tmp_path, {"data": list(range(20))}, policy)
    assert (status, code) == ("error", "invalid_arguments")
    assert "more than 10 values" in text and "max_argument_items" in text
    assert RAN == []
    status, _, _, _ = await _call(tmp_path, {"data": [1, 2]}, policy)
    assert status == "ok"


async def test_a_cycle_is_refused_not_a_crash(tmp_path: Path) -> None:
    loop: list[object] = []
    loop.append(loop)
    status, code, _, rows = await _call(tmp_path, {"data": loop})
    assert (status, code) == ("error", "invalid_arguments") and RAN == []
    assert rows == ["take:error:invalid_arguments"]


class _Unwritable:
    def __str__(self) -> str:
        raise ValueError("no text for this one")


async def test_arguments_the_audit_cannot_write_do_not_run(tmp_path: Path) -> None:
    status, code, text, rows = await _call(tmp_path, {"data": {"k": _Unwritable()}})
    assert (status, code) == ("error", "invalid_arguments")
    assert "cannot be recorded in the audit log" in text
    assert RAN == []
    assert rows == ["take:error:invalid_arguments"]
