"""The default pipeline: each gate built with the collaborators it owns, in the pinned order
(outer → inner). ``ToolInvoker`` calls this with its constructor's arguments; pass your own
tuple as ``gates=`` to change the pipeline."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..approval.service import ApprovalService
from ..artifacts.store import BlobStore
from ..errors import UsageError
from ..guardrails.base import Guardrail
from ..hooks import HookManager
from ..policy.engine import Policies
from ..toolbox.catalog import CatalogBase
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
    PolicyGate,
    PreflightGate,
    ProgressGate,
    RecordGate,
    ShapingGate,
    TimeoutGate,
    TraceGate,
    ValidateGate,
)
from .state import Gate
from .tracing import TracerSource

__all__ = ["GATE_ORDER", "default_gates", "with_extra_gates"]

GATE_ORDER = ("trace", "record", "errors", "budget", "lookup", "kind", "validate", "guardrails_in",
              "policy", "preflight", "approval", "artifact_refs", "cancellation", "shaping",
              "guardrails_out", "progress", "timeout")
"""Gates after the cancellation check do their work on the way back out, so the executor's
result passes progress (TOOL_RESULT), then guardrails out, then shaping. ``preflight`` runs the
tool's own check right before ``approval``: a call its rules refuse never reaches a person."""


def default_gates(*, catalog: CatalogBase, approvals: ApprovalService,
                  artifact_store: BlobStore | None = None, hooks: HookManager | None = None,
                  guardrails: Iterable[Guardrail] = (), audit: AuditLog | None = None,
                  tracing: TracerSource | None = None,
                  policies: Policies | None = None) -> tuple[Gate, ...]:
    """The pipeline of ``GATE_ORDER``, each gate holding what it needs (the policy gate takes
    part only with ``policies`` that govern besides the default set)."""
    rails = tuple(guardrails)
    governed = policies is not None and policies.governs
    gates: tuple[Gate, ...] = (
        TraceGate(tracing), RecordGate(audit, hooks), ErrorGate(), BudgetGate(),
        LookupGate(catalog), KindGate(), ValidateGate(artifact_store),
        GuardrailInGate(rails, hooks), PolicyGate(policies), PreflightGate(),
        ApprovalGate(approvals, governed=governed),
        ArtifactRefGate(artifact_store), CancellationGate(),
        ShapingGate(artifact_store, hooks), GuardrailOutGate(rails, hooks),
        ProgressGate(), TimeoutGate(),
    )
    assert tuple(g.name for g in gates) == GATE_ORDER
    return gates


def with_extra_gates(gates: Sequence[Gate], extra: Iterable[Gate]) -> tuple[Gate, ...]:
    """``gates`` with each of ``extra`` placed where it says (``after="validate"``, or
    ``before="execute"`` for the innermost), in the order given.

    Raises:
        UsageError: a gate names no anchor, both, or one that is not in the pipeline.
    """
    placed = list(gates)
    for gate in extra:
        names = [g.name for g in placed]
        if (gate.after is None) == (gate.before is None):
            raise UsageError(f"extra gate {gate.name!r} must say where it goes: set exactly one "
                             f"of after= or before= to one of {', '.join(names)} (or "
                             "before='execute')")
        anchor = gate.after or gate.before or ""
        if gate.before == "execute":
            placed.append(gate)
            continue
        if anchor not in names:
            raise UsageError(f"extra gate {gate.name!r} is anchored to {anchor!r}, which is not "
                             f"in the pipeline ({', '.join(names)}, or before='execute')")
        index = names.index(anchor)
        placed.insert(index + 1 if gate.after else index, gate)
    return tuple(placed)
