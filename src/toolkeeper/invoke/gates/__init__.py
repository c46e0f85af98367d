"""The gates of the pipeline, one per module; ``builder.py`` puts them in order."""

from .approval import ApprovalGate
from .artifacts import ArtifactRefGate
from .budget import BudgetGate
from .cancellation import CancellationGate
from .errors import ErrorGate, result_for
from .execute import execute
from .guardrails import GuardrailInGate, GuardrailOutGate
from .kind import KindGate
from .lookup import LookupGate
from .policy import PolicyGate
from .preflight import PreflightGate
from .progress import ProgressGate
from .record import RecordGate
from .shaping import ShapingGate
from .timeout import TimeoutGate
from .trace import TraceGate
from .validate import ValidateGate

__all__ = ["ApprovalGate", "ArtifactRefGate", "BudgetGate", "CancellationGate", "ErrorGate",
           "GuardrailInGate", "GuardrailOutGate", "KindGate", "LookupGate", "PolicyGate",
           "PreflightGate", "ProgressGate", "RecordGate", "ShapingGate", "TimeoutGate", "TraceGate",
           "ValidateGate", "execute", "result_for"]
