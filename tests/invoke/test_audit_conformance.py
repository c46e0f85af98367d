"""The audit logs pass the shipped conformance suite: SQLite, and PostgreSQL on a real server
started by the tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper.invoke.audit import PostgresAuditLog, SqliteAuditLog
from toolkeeper.testing import AuditLogConformance


class TestSqliteAuditLog(AuditLogConformance):
    def make_log(self, tmp_path: Path) -> SqliteAuditLog:
        return SqliteAuditLog(tmp_path / "toolkeeper.db")


class TestPostgresAuditLog(AuditLogConformance):
    @pytest.fixture(autouse=True)
    def _database(self, postgres_url: str) -> None:
        self.url = postgres_url

    def make_log(self, tmp_path: Path) -> PostgresAuditLog:
        return PostgresAuditLog(self.url)
