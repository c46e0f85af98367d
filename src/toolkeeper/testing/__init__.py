"""Shipped test helpers: scripted fake models of each provider's SDK (``models``) so an agent
loop runs without an API key — each needs only the SDK it answers for, which the extras that
name it bring — and conformance suites for users' own extensions, which run under pytest
(install ``toolkeeper[testing]``: the store suite walks the approval state machine with
Hypothesis; without it, ``ApprovalStoreConformance`` says so in one line when imported)."""

from __future__ import annotations

import contextlib

from ..extras import MissingExtraError, missing
from .audit_log import AuditLogConformance
from .blob_store import BlobStoreConformance
from .models import (
    ScriptedAnthropic,
    ScriptedCall,
    ScriptedGemini,
    ScriptedOpenAIChat,
    ScriptedOpenAIResponses,
    Turn,
    call,
    say,
)

# no Hypothesis: the doubles work, and the store suite says what to install (__getattr__)
with contextlib.suppress(MissingExtraError):
    from .approval_store import ApprovalStoreConformance

__all__ = ["ApprovalStoreConformance", "AuditLogConformance", "BlobStoreConformance",
           "ScriptedAnthropic",
           "ScriptedCall", "ScriptedGemini", "ScriptedOpenAIChat", "ScriptedOpenAIResponses",
           "Turn", "call", "say"]


def __getattr__(name: str) -> object:
    """``ApprovalStoreConformance`` without the testing extra: the one line naming it."""
    if name == "ApprovalStoreConformance":
        raise missing("testing", "ApprovalStoreConformance (toolkeeper.testing)")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
