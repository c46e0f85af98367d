"""What an invocation returns and what a session records (seed 001's chain types)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..approval.models import args_digest
from ..core.results import ToolResult

__all__ = ["ChainCallRecord", "ChainFile", "ChainRunResult", "InvocationResult", "Status"]

Status = Literal["ok", "error", "denied", "pending"]
RecordStatus = Literal["ok", "error", "denied", "pending", "timeout"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ChainFile:
    """A media result surfaced as a file at a workspace path (``media/<tool>_0.png``)."""

    path: str
    media_type: str
    artifact_ref: str
    size: int


@dataclass(frozen=True, kw_only=True, slots=True)
class InvocationResult:
    """The outcome of one invocation: exactly one per call, whatever happened.

    Attributes:
        status: ``ok``, ``error`` (it failed, or could not run), ``denied`` (policy or a human
            refused) or ``pending`` (waiting for a human; resume with ``approval_id``).
        text: What the model reads (a preview when the full text was offloaded).
        structured: Structured content, when the tool returned some.
        artifact_ref: Where the full result is, when it was too large to inline.
        files: Media results stored as files.
        result: The tool's ``ToolResult`` (``None`` when the tool did not run).
        error_code: Stable code of the failure (see ``toolkeeper.errors``).
    """

    status: Status
    text: str = ""
    structured: dict[str, Any] | None = None
    artifact_ref: str | None = None
    files: tuple[ChainFile, ...] = ()
    result: ToolResult | None = None
    error_code: str | None = None
    call_id: str = ""
    tool: str = ""
    approval_id: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_tool_result(self) -> ToolResult:
        """A ``ToolResult`` for rendering into a provider message (errors marked as such)."""
        if self.result is not None and self.status == "ok" and self.artifact_ref is None:
            return self.result
        return ToolResult.text_result(
            self.text, is_error=self.status != "ok", error_code=self.error_code,
            structured_content=self.structured if self.status == "ok" else None,
        )


class ChainCallRecord:
    """One entry of a session's trace, appended on every outcome.

    ``args_digest`` (SHA-256 of the canonical arguments) is computed when first read.
    """

    __slots__ = ("_arguments", "_digest", "call_id", "duration_ms", "error_code", "status", "tool")

    def __init__(self, *, tool: str, call_id: str, status: RecordStatus, duration_ms: float,
                 error_code: str | None = None, args_digest: str | None = None,
                 arguments: dict[str, Any] | None = None) -> None:
        self.tool = tool
        self.call_id = call_id
        self.status = status
        self.duration_ms = duration_ms
        self.error_code = error_code
        self._digest = args_digest
        self._arguments = arguments

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
    """The outcome of a code-mode run: its output and every call it made."""

    status: Literal["ok", "error", "timeout"]
    output_text: str
    call_trace: tuple[Any, ...]
    duration_ms: float
