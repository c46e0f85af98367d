"""Guardrails: checks before and after execution."""

from .base import Guardrail, GuardrailOutcome, passed, redact, trip
from .builtin import ArgumentDenyPatterns, ArgumentSizeLimit, RateLimit, SecretRedactor

__all__ = [
    "ArgumentDenyPatterns",
    "ArgumentSizeLimit",
    "Guardrail",
    "GuardrailOutcome",
    "RateLimit",
    "SecretRedactor",
    "passed",
    "redact",
    "trip",
]
