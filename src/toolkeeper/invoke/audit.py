"""The audit log: every invocation, in the same SQLite file as approvals by default."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from ..approval.pg import is_url, open_database
from ..approval.sqlite import Database, number, text_or_none
from ..errors import StoreError
from ..guardrails.builtin import SecretRedactor

__all__ = ["AuditEntry", "AuditLog", "PostgresAuditLog", "SqliteAuditLog", "redact_arguments"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    call_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    arguments TEXT NOT NULL,
    status TEXT NOT NULL,
    error_code TEXT,
    duration_ms REAL NOT NULL,
    approval_id TEXT,
    decision TEXT,
    approver TEXT
);
CREATE INDEX IF NOT EXISTS audit_tool ON audit(tool, ts);
CREATE INDEX IF NOT EXISTS audit_session ON audit(session_id, ts);
"""
_SECRET = re.compile(SecretRedactor().pattern.pattern)
_MAX_VALUE = 500


@dataclass(frozen=True, kw_only=True, slots=True)
class AuditEntry:
    """One invocation as the audit log keeps it."""

    ts: float
    call_id: str
    session_id: str
    tool: str
    args_digest: str
    arguments: dict[str, object]
    status: str
    error_code: str | None
    duration_ms: float
    approval_id: str | None = None
    decision: str | None = None
    approver: str | None = None


def redact_arguments(value: object) -> object:
    """Arguments with secrets masked and long strings cut, for the audit log."""
    if isinstance(value, str):
        masked = _SECRET.sub("[REDACTED]", value)
        return masked if len(masked) <= _MAX_VALUE else masked[:_MAX_VALUE] + "…"
    if isinstance(value, dict):
        return {k: redact_arguments(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_arguments(v) for v in value]
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return value


@runtime_checkable
class AuditLog(Protocol):
    def record(self, entry: AuditEntry) -> None: ...
    def query(self, *, tool: str | None = None, status: str | None = None,
              session_id: str | None = None, limit: int = 100) -> list[AuditEntry]: ...


class SqliteAuditLog:
    """The audit table in a SQLite file (``toolkeeper.db`` by default, shared with approvals)."""

    def __init__(self, path: str | Path | Database) -> None:
        self.db = open_database(path, _SCHEMA, "audit")

    def record(self, entry: AuditEntry) -> None:
        row = asdict(entry)
        row["arguments"] = json.dumps(redact_arguments(entry.arguments), default=str,
                                      ensure_ascii=False)
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO audit (ts, call_id, session_id, tool, args_digest, arguments, status, "
                "error_code, duration_ms, approval_id, decision, approver) VALUES (:ts, :call_id, "
                ":session_id, :tool, :args_digest, :arguments, :status, :error_code, :duration_ms, "
                ":approval_id, :decision, :approver)", row)

    def query(self, *, tool: str | None = None, status: str | None = None,
              session_id: str | None = None, limit: int = 100) -> list[AuditEntry]:
        clauses, params = [], []
        for column, value in (("tool", tool), ("status", status), ("session_id", session_id)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self.db.query(
            "SELECT ts, call_id, session_id, tool, args_digest, arguments, status, error_code, "
            f"duration_ms, approval_id, decision, approver FROM audit {where} "
            "ORDER BY seq DESC LIMIT ?", (*params, limit))
        return [AuditEntry(ts=number(r[0]), call_id=str(r[1]), session_id=str(r[2]),
                           tool=str(r[3]), args_digest=str(r[4]), arguments=json.loads(str(r[5])),
                           status=str(r[6]), error_code=text_or_none(r[7]),
                           duration_ms=number(r[8]), approval_id=text_or_none(r[9]),
                           decision=text_or_none(r[10]), approver=text_or_none(r[11]))
                for r in rows]


class PostgresAuditLog(SqliteAuditLog):
    """The audit table on PostgreSQL (``postgresql://…``), shared by every replica."""

    def __init__(self, url: str) -> None:
        if not is_url(url):
            raise StoreError(f"PostgresAuditLog needs a postgresql:// URL, got {url!r}")
        super().__init__(url)
