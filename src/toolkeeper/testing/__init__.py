"""Shipped test helpers: conformance suites for users' own extensions (install
``toolkeeper[testing]``: they run under pytest, and the store suite walks the approval state
machine with Hypothesis)."""

from .approval_store import ApprovalStoreConformance
from .audit_log import AuditLogConformance

__all__ = ["ApprovalStoreConformance", "AuditLogConformance"]
