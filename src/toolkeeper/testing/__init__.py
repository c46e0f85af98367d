"""Shipped test helpers: conformance suites for users' own extensions."""

from .approval_store import ApprovalStoreConformance

__all__ = ["ApprovalStoreConformance"]
