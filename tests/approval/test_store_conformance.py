"""The SQLite approval store passes the shipped conformance suite."""

from __future__ import annotations

from pathlib import Path

from toolkeeper.approval import SqliteApprovalStore
from toolkeeper.testing import ApprovalStoreConformance


class TestSqliteApprovalStore(ApprovalStoreConformance):
    def make_store(self, tmp_path: Path) -> SqliteApprovalStore:
        return SqliteApprovalStore(tmp_path / "toolkeeper.db")
