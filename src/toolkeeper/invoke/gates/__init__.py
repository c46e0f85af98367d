"""The gates of the pipeline, one per module, and the default order (outer → inner)."""

from .approval import ApprovalGate
from .artifacts import ArtifactRefGate
from .budget import BudgetGate
from .cancellation import CancellationGate
from .errors import ErrorGate
from .execute import execute
from .guardrails import GuardrailInGate, GuardrailOutGate
from .kind import KindGate
from .lookup import LookupGate
from .progress import ProgressGate
from .shaping import ShapingGate
from .timeout import TimeoutGate
from .validate import ValidateGate

__all__ = ["DEFAULT_GATES", "execute"]

# Gates after the cancellation check do their work on the way back out, so the executor's result
# passes progress (TOOL_RESULT), then guardrails out, then shaping.
DEFAULT_GATES = (
    ErrorGate(), BudgetGate(), LookupGate(), KindGate(), ValidateGate(), GuardrailInGate(),
    ApprovalGate(), ArtifactRefGate(), CancellationGate(), ShapingGate(), GuardrailOutGate(),
    ProgressGate(), TimeoutGate(),
)
