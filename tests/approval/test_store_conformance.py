"""The approval stores pass the shipped conformance suite: SQLite, and PostgreSQL on a real
server started by the tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper.approval import PostgresApprovalStore, SqliteApprovalStore
from toolkeeper.testing import ApprovalStoreConformance


class TestSqliteApprovalStore(ApprovalStoreConformance):
    def make_store(self, tmp_path: Path) -> SqliteApprovalStore:
        return SqliteApprovalStore(tmp_path / "toolkeeper.db")


class TestPostgresApprovalStore(ApprovalStoreConformance):
    @pytest.fixture(autouse=True)
    def _database(self, postgres_url: str) -> None:
        self.url = postgres_url

    def make_store(self, tmp_path: Path) -> PostgresApprovalStore:
        return PostgresApprovalStore(self.url)
