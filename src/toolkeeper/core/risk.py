"""Risk ladder and human-in-the-loop modes.

Tool layers use different ladders (SAFE/SENSITIVE/CRITICAL, SAFE/HIGH/CRITICAL); toolkeeper
has one ordered ladder that holds both, ``SAFE < SENSITIVE < HIGH < CRITICAL``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

__all__ = ["HitlMode", "ToolRisk", "default_hitl_mode"]


_E = TypeVar("_E", bound=StrEnum)


def _by_value(cls: type[_E], value: object) -> _E | None:
    """Case- and space-insensitive lookup of an enum member by its value."""
    if isinstance(value, str):
        lowered = value.strip().lower()
        for member in cls:
            if member.value == lowered:
                return member
    return None


class ToolRisk(StrEnum):
    """How much harm a tool can do; ordered ``SAFE < SENSITIVE < HIGH < CRITICAL``.

    - SAFE: read-only, no side effects (web search, read a file, a calculator).
    - SENSITIVE: external reads and network calls (HTTP GET, database reads, listing files).
    - HIGH: local writes and reversible effects (write a file, run a confined command).
    - CRITICAL: irreversible or real-world effects (send an email, delete data, pay).
    """

    SAFE = "safe"
    SENSITIVE = "sensitive"
    HIGH = "high"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        """Position on the ladder, 0 for SAFE."""
        return _RANK[self]

    @classmethod
    def _missing_(cls, value: object) -> ToolRisk | None:
        return _by_value(cls, value)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, ToolRisk):
            return NotImplemented
        return self.rank < other.rank

    def __le__(self, other: object) -> bool:
        if not isinstance(other, ToolRisk):
            return NotImplemented
        return self.rank <= other.rank

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, ToolRisk):
            return NotImplemented
        return self.rank > other.rank

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, ToolRisk):
            return NotImplemented
        return self.rank >= other.rank

    __hash__ = str.__hash__


_RANK = {ToolRisk.SAFE: 0, ToolRisk.SENSITIVE: 1, ToolRisk.HIGH: 2, ToolRisk.CRITICAL: 3}


class HitlMode(StrEnum):
    """How a human is asked before a tool runs.

    - NONE: the tool does not ask by itself (the invoker's policy may still require approval).
    - BLOCKING: wait for a decision; a timeout denies.
    - CONTINUE_ON_TIMEOUT: wait ``hitl_timeout_seconds``, then approve and record that it did.
    - FIRE_AND_CONTINUE: announce the call and proceed at once.
    """

    NONE = "none"
    BLOCKING = "blocking"
    CONTINUE_ON_TIMEOUT = "continue_on_timeout"
    FIRE_AND_CONTINUE = "fire_and_continue"

    @classmethod
    def _missing_(cls, value: object) -> HitlMode | None:
        return _by_value(cls, value)


def default_hitl_mode(risk: ToolRisk) -> HitlMode:
    """The HITL mode a tool gets when it does not choose one.

    SAFE and SENSITIVE tools do not ask; HIGH and CRITICAL tools block for a decision.
    """
    return HitlMode.BLOCKING if risk >= ToolRisk.HIGH else HitlMode.NONE
