"""What an invocation returns and what a session records: ``InvocationResult``,
``ChainCallRecord``, ``ChainFile`` and ``ChainRunResult``, the names agent code built on code-mode
chaining uses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypedDict, Unpack

from ..approval.models import args_digest
from ..core.json import JsonValue
from ..core.results import ToolResult

__all__ = ["ChainCallRecord", "ChainFile", "ChainRunResult", "Envelope", "InvocationResult",
           "Status"]

Status = Literal["ok", "error", "denied", "pending"]
RecordStatus = Literal["ok", "error", "denied", "pending", "timeout", "expired"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ChainFile:
    """A media result surfaced as a file at a workspace path (``media/<tool>_0.png``)."""

    path: str
    media_type: str
    artifact_ref: str
    size: int


class Envelope(TypedDict):
    """The fields every ``InvocationResult`` of one call carries: which call, which tool, and
    the approval that let it through (or that it waits for)."""

    call_id: str
    tool: str
    approval_id: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class InvocationResult:
    """The outcome of one invocation: exactly one per call, whatever happened.

    It is the call's one ``ToolResult`` — what the model is shown, already shaped (truncated or
    offloaded), errors included — inside an envelope that says how the call ended and where
    what it produced went.

    Attributes:
        status: ``ok``, ``error`` (it failed, or could not run), ``denied`` (policy or a human
            refused) or ``pending`` (waiting for a human; resume with ``approval_id``).
        result: The ``ToolResult`` the model is shown (an error result when the call did not
            run or failed).
        ran: Whether the tool's code ran: ``result`` came from the tool, or it ran and failed
            (raised, timed out).
        artifact_ref: Where the full result is, when it was too large to inline.
        artifact_size: Its size in bytes (UTF-8 text), then.
        files: Media results stored as files.
        call_id, tool: The call this answers.
        approval_id: The approval that let the call through, or the pending request.
        refused_by: The gate that refused the call, when the error's code alone does not say
            it (``preflight``: the tool's own refusal, made before a person was asked); the
            audit row's decision and the span's ``toolkeeper.gate`` name it.
    """

    status: Status
    result: ToolResult
    ran: bool = False
    artifact_ref: str | None = None
    artifact_size: int | None = None
    files: tuple[ChainFile, ...] = ()
    call_id: str = ""
    tool: str = ""
    approval_id: str | None = None
    refused_by: str | None = None

    @classmethod
    def failed(cls, status: Status, text: str, error_code: str, *, ran: bool = False,
               **envelope: Unpack[Envelope]) -> InvocationResult:
        """A call that did not run (or, with ``ran``, ran and did not finish: it raised, it
        timed out): an error result for the model."""
        return cls(status=status, result=ToolResult.error(text, code=error_code), ran=ran,
                   **envelope)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def text(self) -> str:
        """What the model reads (a preview when the full text was offloaded)."""
        return self.result.text

    @property
    def structured(self) -> dict[str, object] | None:
        """Structured content, when the tool returned some."""
        return self.result.structured_content if self.status == "ok" else None

    @property
    def error_code(self) -> str | None:
        """Stable code of the failure (see ``toolkeeper.errors``)."""
        if self.status == "ok":
            return None
        return self.result.error_code or "tool_error"

    def to_tool_result(self) -> ToolResult:
        """The ``ToolResult`` for rendering into a provider message (errors marked as such)."""
        return self.result


class ChainCallRecord:
    """One entry of a session's trace, appended on every outcome.

    ``args_digest`` (SHA-256 of the canonical arguments) is computed when first read.
    ``replayed``: a code-mode run answered the call from the journal of the run that paused
    before it (nothing ran).
    """

    __slots__ = ("_arguments", "_digest", "call_id", "duration_ms", "error_code", "replayed",
                 "status", "tool")

    def __init__(self, *, tool: str, call_id: str, status: RecordStatus, duration_ms: float,
                 error_code: str | None = None, args_digest: str | None = None,
                 arguments: dict[str, object] | None = None, replayed: bool = False) -> None:
        self.tool = tool
        self.call_id = call_id
        self.status = status
        self.duration_ms = duration_ms
        self.error_code = error_code
        self._digest = args_digest
        self._arguments = arguments
        self.replayed = replayed

    @property
    def args_digest(self) -> str:
        if self._digest is None:
            self._digest = args_digest(self._arguments or {})
        return self._digest

    def __repr__(self) -> str:
        return (f"ChainCallRecord(tool={self.tool!r}, call_id={self.call_id!r}, "
                f"status={self.status!r}, error_code={self.error_code!r}, "
                f"duration_ms={self.duration_ms})")


@dataclass(frozen=True, kw_only=True, slots=True)
class ChainRunResult:
    """The outcome of a code-mode run: its output, its ``result`` value and every call it made
    (listed even when the script crashed, timed out or was killed)."""

    status: Literal["ok", "error", "timeout", "killed", "pending", "expired"]
    """``pending``: the run paused at a call that waits for a person (``approval_id``); the
    same script sent again by the same client resumes it. ``expired``: the request it paused on
    expired before anyone decided; sent again, the script asks anew."""
    output_text: str
    call_trace: tuple[ChainCallRecord, ...]
    duration_ms: float
    value: JsonValue = None
    files: tuple[ChainFile, ...] = ()
    trace_dropped: int = 0
    """Records that left ``call_trace`` to keep it within the session's ``trace_limit`` (the
    oldest first): ``trace_dropped + len(call_trace)`` calls were made in all."""
    audit_dropped: int = 0
    """Refused calls counted rather than stored in the audit log past the policy's
    ``max_audit_rows`` (one summary row, ``audit_bound``, says how many)."""
    approval_id: str | None = None
    """The request the run paused on (``pending``), or the one that expired (``expired``)."""
