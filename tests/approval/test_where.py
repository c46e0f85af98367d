"""The command a waiting call names reaches the store the call was stored in: nothing added
for the default state dir, ``--state-dir`` for another, ``--db`` for a file of another name,
``--store`` (no password) for PostgreSQL; a store in memory is said to be out of reach. The
audit log a persisted store keeps beside it by default, and ``audit=None`` turns it off."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper import ToolInvoker, tool
from toolkeeper.approval import PersistedApprovalHandler, SqliteApprovalStore
from toolkeeper.approval.where import decide_command, store_options
from toolkeeper.invoke.audit import SqliteAuditLog


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


class _Url:
    path = "postgresql://app@db.internal/approvals"


def test_the_options_name_the_store_a_person_must_reach(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    default = SqliteApprovalStore(tmp_path / "xdg" / "toolkeeper" / "toolkeeper.db")
    assert store_options(default.db) == ""
    assert decide_command("apr_1", default.db) == "toolkeeper approvals decide apr_1 approve"
    other = SqliteApprovalStore(tmp_path / "s" / "toolkeeper.db")
    assert store_options(other.db) == f"--state-dir {tmp_path / 's'}"
    named = SqliteApprovalStore(tmp_path / "agent.db")
    assert store_options(named.db) == f"--db {tmp_path / 'agent.db'}"
    assert store_options(_Url()) == "--store postgresql://app@db.internal/approvals"  # type: ignore[arg-type]
    memory = SqliteApprovalStore(":memory:")
    assert store_options(memory.db) is None
    assert "in memory, no command reaches it" in decide_command("apr_1", memory.db)


def test_an_invoker_over_a_persisted_store_audits_beside_it_unless_told_not_to(
        tmp_path: Path) -> None:
    store = SqliteApprovalStore(tmp_path / "toolkeeper.db")
    beside = ToolInvoker([add], PersistedApprovalHandler(store)).audit
    assert isinstance(beside, SqliteAuditLog) and beside.db is store.db
    assert ToolInvoker([add], PersistedApprovalHandler(store), audit=None).audit is None
    memory = SqliteApprovalStore(":memory:")
    assert ToolInvoker([add], PersistedApprovalHandler(memory)).audit is None
    assert ToolInvoker([add]).audit is None
