"""``ChainPolicy``: the limits every invocation of a session obeys, plain calls and code-mode
chains alike."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from ..core.risk import ToolRisk
from ..errors import ConfigError

__all__ = ["ChainPolicy"]


class ChainPolicy(BaseModel):
    """Timeouts, budgets, the inline-result threshold and the unapproved-risk ceiling.

    A session's own policy (``open_session(policy=...)``, a code-mode run's) is the one in
    force for its calls, in every gate — approval included — instead of the invoker's.

    ``approval_timeout_s`` must stay below ``call_timeout_s``: a slow human yields ``denied``,
    never a call that times out while it waits.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_tool_calls: int = Field(default=50, ge=0)
    call_timeout_s: float = Field(default=60.0, gt=0)
    total_timeout_s: float = Field(default=300.0, gt=0)
    max_inline_result_bytes: int = Field(default=4096, ge=0)
    approval_timeout_s: float = Field(default=55.0, ge=0)
    """How long a call that needs approval waits for the decision (0: not at all). Then it is
    denied (``timeout``) — or, when its stored request lives on (``approval_ttl_s``, a
    handler with a store), it answers ``pending`` and is made again once a person decided
    (``toolkeeper serve --approval-wait``)."""
    hitl_timeout_seconds: float = Field(default=30.0, gt=0)
    """How long CONTINUE_ON_TIMEOUT waits before approving on its own."""
    max_risk_unapproved: ToolRisk | None = None
    """The highest risk that runs without asking. ``None`` (the default): SENSITIVE in an
    ordinary session (a SENSITIVE tool with no HITL mode of its own does not ask) and SAFE in a
    code-mode chain (every call of a script above SAFE asks). A value applies to both."""
    approval_ttl_s: float | None = Field(default=None, gt=0)
    """How long a stored request stays approvable when no call waits for it any more (a
    server's calls answer 'pending' and are made again); ``None``: as long as a call waits
    (``approval_timeout_s``). Past it, the request expires (CONTINUE_ON_TIMEOUT: it is
    approved, as that mode says)."""
    approval_ttl_tools: dict[str, float | Literal["never"]] = Field(default_factory=dict)
    """Per tool name, how long its stored requests stay approvable (seconds, or ``"never"``),
    over ``approval_ttl_s`` and over the tool's own ``metadata.approval_ttl``
    (``[approval] ttl`` in a config)."""
    unapproved_tools: frozenset[str] = frozenset()
    """Tools that never need approval whatever their risk (the built-ins under
    ``autonomy = "full"``)."""
    tool_budgets: dict[str, int] = Field(default_factory=dict)
    """Calls allowed per tool name in one session."""
    namespace_budgets: dict[str, int] = Field(default_factory=dict)
    """Calls allowed per namespace in one session."""
    max_result_size: int | None = Field(default=None, gt=0)
    """Truncate result text longer than this (characters) when no artifact store is configured."""
    truncation: Literal["head", "head_tail"] = "head_tail"
    max_argument_depth: int = Field(default=64, ge=1)
    """How deep a call's arguments may nest (objects and arrays, the arguments object being
    level 1); a call past it is refused (``invalid_arguments``) before anything runs."""
    max_argument_items: int = Field(default=100_000, ge=1)
    """How many values (objects, arrays and scalars) a call's arguments may hold; past it, the
    call is refused the same way."""
    max_audit_rows: int = Field(default=10_000, ge=1)
    """Audit rows one session (a client's, a code-mode run's) writes before it counts its
    refused calls instead of storing each: past it, a call that did not run adds one to
    ``session.audit_dropped`` and one summary row, written when the session closes, says how
    many and names this bound. A call that runs is always stored."""

    def __init__(self, **data: object) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            # Our own check raises ConfigError, a ValueError, which pydantic wraps: unwrap it.
            own = [e["ctx"]["error"] for e in exc.errors() if isinstance(
                e.get("ctx", {}).get("error"), ConfigError)]
            if own:
                raise own[0] from None
            raise

    @field_validator("approval_ttl_tools")
    @classmethod
    def _positive_ttls(cls, value: dict[str, float | str]) -> dict[str, float | str]:
        bad = [name for name, ttl in value.items() if ttl != "never" and float(ttl) <= 0]
        if bad:
            raise ValueError(f"approval_ttl_tools of {', '.join(bad)}: give seconds above 0, "
                             "or 'never'")
        return value

    @model_validator(mode="after")
    def _approval_before_call_timeout(self) -> ChainPolicy:
        if self.approval_timeout_s >= self.call_timeout_s:
            raise ConfigError(
                f"approval_timeout_s ({self.approval_timeout_s}) must be less than call_timeout_s "
                f"({self.call_timeout_s}): a slow approval must end as 'denied', not as a timeout"
            )
        return self
