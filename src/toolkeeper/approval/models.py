"""Approval requests and decisions: frozen, JSON-serializable, bound to canonical arguments."""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Mapping
from enum import StrEnum
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..core.call import ToolCall
from ..core.risk import HitlMode, ToolRisk

__all__ = ["NEVER_S", "OLD_EXPIRED", "SESSION_GRANT_S", "ApprovalAnswer", "ApprovalDecision",
           "ApprovalOutcome", "ApprovalRequest", "args_digest", "as_decision", "changed",
           "duration"]

NEVER_S = 100 * 365 * 86400.0
"""A time-to-live of ``never``: a request that waits for a person however long it takes (a
hundred years, so the store keeps a number and every bound stays finite)."""

SESSION_GRANT_S = 900.0
"""How long "approve for this client" (``scope="session"``) lets the same tool run again in
the session that asked, without asking: 15 minutes, never longer than that session."""

Outcome = Literal["approved", "denied", "skipped", "expired", "pending"]

OLD_EXPIRED = "timeout"
"""What an expired request was called before ``expired`` (stores written then hold it; a
handler may still answer it): read as ``expired``."""


class ApprovalOutcome(StrEnum):
    """The outcomes of an approval, as an enum: ``ApprovalDecision.APPROVED`` and its siblings
    are these members, and each equals its string (``ApprovalOutcome.APPROVED == "approved"``).
    ``EXPIRED``: nobody decided in time (the call did not run); ``TIMEOUT`` is its old name."""

    APPROVED = "approved"
    DENIED = "denied"
    SKIPPED = "skipped"
    EXPIRED = "expired"
    PENDING = "pending"
    TIMEOUT = "expired"

    @classmethod
    def _missing_(cls, value: object) -> ApprovalOutcome | None:
        return cls.EXPIRED if value == OLD_EXPIRED else None


def duration(seconds: float) -> str:
    """How long, for a person: ``0.2 s``, ``45 s``, ``5 min``, ``60 min``, ``2 h 30 min``."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{round(seconds, 2):g} s"
    minutes = round(seconds / 60)
    if minutes <= 90:
        return f"{minutes} min"
    hours, rest = divmod(minutes, 60)
    return f"{hours} h" + (f" {rest} min" if rest else "")


def changed(asked: Mapping[str, object], edited: Mapping[str, object]) -> list[str]:
    """The top-level arguments an edit changed, added or removed, sorted (one left out is
    the same as one given as ``null``)."""
    keys = set(asked) | set(edited)
    return sorted(k for k in keys if args_digest(asked.get(k)) != args_digest(edited.get(k)))


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                              default=str)
"""What ``json.dumps`` with these options builds on every call (it holds no state)."""


def args_digest(arguments: object, *, surrogates: bool = False) -> str:
    """SHA-256 of the canonical JSON of the arguments (sorted keys, no spaces).

    A lone surrogate (a string no UTF-8 text holds, which JSON's ``\\udXXX`` escapes can still
    send) raises ``UnicodeEncodeError``: the door refuses such a call, whose audit row could
    not hold it. ``surrogates=True`` digests it as its code point's bytes instead, for a
    caller that must go on to the door so that the door refuses and records it."""
    return hashlib.sha256(_CANONICAL.encode(arguments).encode(
        "utf-8", "surrogatepass" if surrogates else "strict")).hexdigest()


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

    @model_validator(mode="before")
    @classmethod
    def _from_call(cls, data: object) -> object:
        """``ApprovalRequest(call=tool_call, risk=...)``: the call gives ``call_id``, ``tool``,
        ``arguments`` and their digest (``session_id`` defaults to empty)."""
        if not isinstance(data, dict) or "call" not in data:
            return data
        fields = dict(data)
        call = fields.pop("call")
        if not isinstance(call, ToolCall):
            raise ValueError(f"call must be a ToolCall, not {type(call).__name__}")
        fields.setdefault("call_id", call.id)
        fields.setdefault("tool", call.name)
        fields.setdefault("arguments", dict(call.arguments))
        fields.setdefault("args_digest", args_digest(fields["arguments"]))
        fields.setdefault("session_id", "")
        return fields

    @property
    def call(self) -> ToolCall:
        """The call this request asks about, as a ``ToolCall``."""
        return ToolCall(id=self.call_id, name=self.tool, arguments=dict(self.arguments))

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
    ``SESSION_GRANT_S`` seconds. ``ApprovalDecision.APPROVED`` (``DENIED``, ``SKIPPED``,
    ``TIMEOUT``, ``PENDING``) are the members of ``ApprovalOutcome``, reachable here for
    handlers written for an agents layer that answers with them: second names, kept for
    good (a name of the public contract that programs written for it use).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    APPROVED: ClassVar[ApprovalOutcome] = ApprovalOutcome.APPROVED
    DENIED: ClassVar[ApprovalOutcome] = ApprovalOutcome.DENIED
    SKIPPED: ClassVar[ApprovalOutcome] = ApprovalOutcome.SKIPPED
    EXPIRED: ClassVar[ApprovalOutcome] = ApprovalOutcome.EXPIRED
    TIMEOUT: ClassVar[ApprovalOutcome] = ApprovalOutcome.EXPIRED
    PENDING: ClassVar[ApprovalOutcome] = ApprovalOutcome.PENDING

    request_id: str
    outcome: Outcome
    message: str = ""
    approver: str = ""
    scope: Literal["once", "session"] = "once"
    decided_at: float = Field(default_factory=time.time)
    arguments: dict[str, object] | None = None
    """Approved with these arguments instead of the asked ones (a person edited them): the
    call runs with them, once; the request stays bound to the asked arguments' digest, so the
    same call made again is told this run's result."""

    @field_validator("outcome", mode="before")
    @classmethod
    def _plain_outcome(cls, value: object) -> object:
        if isinstance(value, ApprovalOutcome):
            return value.value
        return "expired" if value == OLD_EXPIRED else value

    @property
    def approved(self) -> bool:
        return self.outcome == "approved"

    @property
    def edited(self) -> bool:
        """Approved with other arguments than the asked ones."""
        return self.arguments is not None


ApprovalAnswer = ApprovalDecision | ApprovalOutcome | str | bool
"""What a handler may answer: a full decision, an outcome (``ApprovalDecision.APPROVED``), its
string (``"approved"``) or a bool (``True`` approves, ``False`` denies)."""


def as_decision(answer: object, request: ApprovalRequest, *, approver: str = "") -> ApprovalDecision:
    """The handler's ``answer`` to ``request`` as an ``ApprovalDecision``; ``TypeError`` naming
    what is accepted for anything else."""
    if isinstance(answer, ApprovalDecision):
        return answer
    if isinstance(answer, bool):
        return ApprovalDecision(request_id=request.id, approver=approver,
                                outcome="approved" if answer else "denied")
    if isinstance(answer, str):
        try:
            outcome = ApprovalOutcome(answer.strip().lower())
        except ValueError:
            raise ValueError(
                f"the approval handler answered {answer!r} for '{request.tool}'; answer one of "
                f"{', '.join(repr(o.value) for o in ApprovalOutcome)}, a bool or an "
                "ApprovalDecision") from None
        return ApprovalDecision(request_id=request.id, outcome=outcome.value, approver=approver)
    raise TypeError(
        f"the approval handler answered a {type(answer).__name__} for '{request.tool}'; answer "
        "an ApprovalDecision, ApprovalDecision.APPROVED/DENIED/SKIPPED, its string "
        "('approved') or a bool")
