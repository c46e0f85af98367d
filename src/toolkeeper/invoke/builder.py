"""The default pipeline: each gate built with the collaborators it owns, in the pinned order
(outer → inner). ``ToolInvoker`` calls this with its constructor's arguments; pass your own
tuple as ``gates=`` to change the pipeline."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..approval.service import ApprovalService
from ..artifacts.store import BlobStore
from ..guardrails.base import Guardrail
from ..hooks import HookManager
from .audit import AuditLog
from .gates import (
    ApprovalGate,
    ArtifactRefGate,
    BudgetGate,
    CancellationGate,
    ErrorGate,
    GuardrailInGate,
    GuardrailOutGate,
    KindGate,
    LookupGate,
    ProgressGate,
    RecordGate,
    ShapingGate,
    TimeoutGate,
    ValidateGate,
)
from .state import Gate

__all__ = ["GATE_ORDER", "default_gates"]

GATE_ORDER = ("record", "errors", "budget", "lookup", "kind", "validate", "guardrails_in",
              "approval", "artifact_refs", "cancellation", "shaping", "guardrails_out",
              "progress", "timeout")
"""Gates after the cancellation check do their work on the way back out, so the executor's
result passes progress (TOOL_RESULT), then guardrails out, then shaping."""


def default_gates(*, catalog: Any, approvals: ApprovalService,
                  artifact_store: BlobStore | None = None, hooks: HookManager | None = None,
                  guardrails: Iterable[Guardrail] = (), audit: AuditLog | None = None,
                  ) -> tuple[Gate, ...]:
    """The pipeline of ``GATE_ORDER``, each gate holding what it needs."""
    rails = tuple(guardrails)
    gates: tuple[Gate, ...] = (
        RecordGate(audit, hooks), ErrorGate(), BudgetGate(), LookupGate(catalog), KindGate(),
        ValidateGate(artifact_store), GuardrailInGate(rails, hooks), ApprovalGate(approvals),
        ArtifactRefGate(artifact_store), CancellationGate(),
        ShapingGate(artifact_store, hooks), GuardrailOutGate(rails, hooks),
        ProgressGate(), TimeoutGate(),
    )
    assert tuple(g.name for g in gates) == GATE_ORDER
    return gates
