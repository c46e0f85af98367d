"""What every adapter test drives: a safe tool, a risky one that records each run, and an
invoker over a SQLite approval store and audit log in one file — made anew for a "restart"."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from toolkeeper import ChainPolicy, ToolInvoker, ToolRisk, tool
from toolkeeper.approval import PersistedApprovalHandler, SqliteApprovalStore
from toolkeeper.invoke.audit import AuditEntry, SqliteAuditLog

DELETED: list[str] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(risk=ToolRisk.HIGH)
def delete_file(path: str) -> str:
    """Delete a file."""
    DELETED.append(path)
    return f"deleted {path}"


@tool
def fetch(url: str) -> str:
    """Fetch a URL (always fails here)."""
    raise ConnectionError(f"cannot reach {url}")


@dataclass
class World:
    """One process's objects over the same state file."""

    db: Path
    store: SqliteApprovalStore = field(init=False)
    audit: SqliteAuditLog = field(init=False)
    policy: ChainPolicy = field(default_factory=lambda: ChainPolicy(approval_ttl_s=3600))
    invoker: ToolInvoker = field(init=False)

    def __post_init__(self) -> None:
        self.store = SqliteApprovalStore(self.db)
        self.audit = SqliteAuditLog(self.db)
        self.invoker = ToolInvoker([add, delete_file, fetch],
                                   PersistedApprovalHandler(self.store), policy=self.policy,
                                   audit=self.audit)

    def rows(self, tool: str) -> list[AuditEntry]:
        return sorted(self.audit.query(tool=tool), key=lambda e: e.ts)

    def decisions(self) -> dict[str, tuple[str, str]]:
        """path → (state, approver) of every stored request."""
        return {str(s.request.arguments["path"]): (s.state, s.decision.approver if s.decision
                                                    else "") for s in self.store.requests()}
