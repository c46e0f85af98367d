"""Guardrails: checks before and after a tool runs that pass, trip, or redact."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..core.results import ToolResult
    from ..core.spec import ToolLike

__all__ = ["Guardrail", "GuardrailOutcome", "passed", "redact", "trip"]


@dataclass(frozen=True, kw_only=True, slots=True)
class GuardrailOutcome:
    """``pass``, ``trip`` (the call is denied, naming the guardrail and reason) or ``redact``
    (the value is replaced, e.g. secrets masked)."""

    action: Literal["pass", "trip", "redact"]
    reason: str = ""
    value: object = None
    """What replaces the arguments (a dict) or the result (a ``ToolResult``) on ``redact``."""


def passed() -> GuardrailOutcome:
    return _PASS


def trip(reason: str) -> GuardrailOutcome:
    return GuardrailOutcome(action="trip", reason=reason)


def redact(value: object, reason: str = "") -> GuardrailOutcome:
    return GuardrailOutcome(action="redact", value=value, reason=reason)


_PASS = GuardrailOutcome(action="pass")


@runtime_checkable
class Guardrail(Protocol):
    """A check with a name; either method may be a no-op returning ``passed()``."""

    name: str

    async def check_input(self, tool: ToolLike, arguments: dict[str, object]
                          ) -> GuardrailOutcome: ...
    async def check_output(self, tool: ToolLike, result: ToolResult) -> GuardrailOutcome: ...
