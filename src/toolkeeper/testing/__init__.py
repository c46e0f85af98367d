"""Shipped test helpers: conformance suites for users' own extensions (install
``toolkeeper[testing]``: they run under pytest, and the store suite walks the approval state
machine with Hypothesis), and scripted fake models of each provider's SDK (``models``) so an
agent loop runs without an API key."""

from .approval_store import ApprovalStoreConformance
from .audit_log import AuditLogConformance
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

__all__ = ["ApprovalStoreConformance", "AuditLogConformance", "ScriptedAnthropic",
           "ScriptedCall", "ScriptedGemini", "ScriptedOpenAIChat", "ScriptedOpenAIResponses",
           "Turn", "call", "say"]
