"""Shipped test helpers: conformance suites for users' own extensions."""

from .approval_store import ApprovalStoreConformance
from .audit_log import AuditLogConformance

__all__ = ["ApprovalStoreConformance", "AuditLogConformance"]
