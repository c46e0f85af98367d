"""Human approval: requests, decisions, handlers and durable stores."""

from .handlers import (
    ApprovalHandler,
    AutoApprovalHandler,
    CallbackApprovalHandler,
    CliApprovalHandler,
)
from .models import ApprovalDecision, ApprovalOutcome, ApprovalRequest, args_digest
from .persisted import PersistedApprovalHandler
from .store import ApprovalStore, PostgresApprovalStore, SqliteApprovalStore, StoredApproval

__all__ = [
    "ApprovalDecision",
    "ApprovalHandler",
    "ApprovalOutcome",
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
