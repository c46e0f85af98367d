"""``UNSET``: the default of an argument where ``None`` means something of its own (``None``:
no audit log; left unset: the default one)."""

from __future__ import annotations

import enum
from typing import Literal

__all__ = ["UNSET", "Unset"]


class _Unset(enum.Enum):
    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


UNSET = _Unset.UNSET
Unset = Literal[_Unset.UNSET]
"""The type of ``UNSET`` (``audit: AuditLog | Unset | None = UNSET``)."""
