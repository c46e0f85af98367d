"""Approval requests and decisions: frozen, JSON-serializable, bound to canonical arguments."""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..core.risk import HitlMode, ToolRisk

__all__ = ["SESSION_GRANT_S", "ApprovalDecision", "ApprovalRequest", "args_digest"]

SESSION_GRANT_S = 900.0
"""How long "approve for this client" (``scope="session"``) lets the same tool run again in
the session that asked, without asking: 15 minutes, never longer than that session."""

Outcome = Literal["approved", "denied", "skipped", "timeout", "pending"]


def args_digest(arguments: object) -> str:
    """SHA-256 of the canonical JSON of the arguments (sorted keys, no spaces)."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                           default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ApprovalRequest(BaseModel):
    """A call waiting for a human decision; survives restarts when stored."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(default_factory=lambda: "apr_" + secrets.token_urlsafe(16))
    call_id: str
    tool: str
    risk: ToolRisk
    hitl_mode: HitlMode = HitlMode.BLOCKING
    arguments: dict[str, object]
    args_digest: str
    session_id: str
    reason: str = ""
    created_at: float = Field(default_factory=time.time)
    expires_at: float | None = None

    @classmethod
    def for_call(cls, *, call_id: str, tool: str, risk: ToolRisk, hitl_mode: HitlMode,
                 arguments: dict[str, object], session_id: str, reason: str,
                 timeout_s: float | None) -> ApprovalRequest:
        now = time.time()
        return cls(call_id=call_id, tool=tool, risk=risk, hitl_mode=hitl_mode,
                   arguments=arguments, args_digest=args_digest(arguments),
                   session_id=session_id, reason=reason, created_at=now,
                   expires_at=now + timeout_s if timeout_s else None)


class ApprovalDecision(BaseModel):
    """A human's (or a rule's) answer to one request.

    ``scope="session"`` approves this tool in the asking session (one client's) for
    ``SESSION_GRANT_S`` seconds.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    request_id: str
    outcome: Outcome
    message: str = ""
    approver: str = ""
    scope: Literal["once", "session"] = "once"
    decided_at: float = Field(default_factory=time.time)

    @property
    def approved(self) -> bool:
        return self.outcome == "approved"
