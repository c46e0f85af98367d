"""``Problem``: one thing an export had to change, could not express, or refused."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Problem"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Problem:
    """A lint result for one tool in one wire format.

    Severities: ``error`` — a requested mode (strict) could not be honoured, or the tool cannot be
    declared at all; ``warning`` — the provider is shown less than the tool means; ``info`` — the
    declaration differs from the schema but the meaning survives (toolkeeper still enforces it).
    """

    severity: Literal["error", "warning", "info"]
    api_format: str
    tool: str
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.severity}: {self.tool} [{self.api_format}] {self.path}: {self.message}"
