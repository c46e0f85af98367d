"""Human approval: requests, decisions, handlers and durable stores."""

from .handlers import (
    ApprovalHandler,
    AutoApprovalHandler,
    CallbackApprovalHandler,
    CliApprovalHandler,
)
from .models import ApprovalDecision, ApprovalRequest, args_digest
from .persisted import PersistedApprovalHandler
from .store import ApprovalStore, PostgresApprovalStore, SqliteApprovalStore, StoredApproval

__all__ = [
    "ApprovalDecision",
    "ApprovalHandler",
    "ApprovalRequest",
    "ApprovalStore",
    "AutoApprovalHandler",
    "CallbackApprovalHandler",
    "CliApprovalHandler",
    "PersistedApprovalHandler",
    "PostgresApprovalStore",
    "SqliteApprovalStore",
    "StoredApproval",
    "args_digest",
]
