"""The whole exception tree of toolkeeper.

Two branches matter to a model and are kept apart: the call was refused before the tool ran
(``ToolDidNotRunError``) and the tool ran and failed (``ToolFailedError``). Developer mistakes at
definition or configuration time never reach a model; infrastructure failures reach the host.

The tree (a test checks that this drawing matches the real classes)::

    ToolkeeperError
    ├── UsageError
    │   ├── SchemaError
    │   └── ConfigError
    ├── StoreError
    ├── WireFormatError
    ├── ApprovalPending
    └── ToolCallError
        ├── ToolDidNotRunError
        │   ├── UnknownToolError
        │   ├── MalformedCallError
        │   ├── InvalidArgumentsError
        │   ├── ToolNotCallableError
        │   ├── GuardrailTrippedError
        │   ├── ApprovalDeniedError
        │   ├── ApprovalExpiredError
        │   ├── BudgetExceededError
        │   ├── PolicyViolationError
        │   │   └── PolicyDeniedError
        │   ├── CallCancelledError
        │   └── SandboxUnavailableError
        └── ToolFailedError
            ├── ToolRaisedError
            ├── ToolTimeoutError
            ├── SandboxLimitError
            └── InvalidOutputError

Every ``ToolCallError`` has a stable ``code`` (a short snake_case string that never changes
between releases) and a message that says what happened, to which tool, and what to do next.
``ApprovalPending`` is a signal, not a failure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from .core.json import JsonObject

__all__ = [
    "ApprovalDeniedError",
    "ApprovalExpiredError",
    "ApprovalPending",
    "BudgetExceededError",
    "CallCancelledError",
    "ConfigError",
    "GuardrailTrippedError",
    "InvalidArgumentsError",
    "InvalidOutputError",
    "MalformedCallError",
    "PolicyDeniedError",
    "PolicyViolationError",
    "SandboxLimitError",
    "SandboxUnavailableError",
    "SchemaError",
    "StoreError",
    "ToolCallError",
    "ToolDidNotRunError",
    "ToolFailedError",
    "ToolNotCallableError",
    "ToolRaisedError",
    "ToolTimeoutError",
    "ToolkeeperError",
    "UnknownToolError",
    "UsageError",
    "WireFormatError",
]


class ToolkeeperError(Exception):
    """Root of every exception toolkeeper raises on purpose."""


class UsageError(ToolkeeperError, ValueError):
    """A developer mistake: wrong API use. Never shown to a model. Also a ``ValueError``, so
    code that catches the standard exception for a bad definition keeps working."""


class SchemaError(UsageError):
    """A tool definition cannot be turned into a schema (names the function and parameter)."""


class ConfigError(UsageError):
    """A configuration file or value is wrong (names the file, key and line where known)."""


class StoreError(ToolkeeperError):
    """A persistent store (approvals, audit, artifacts) failed. Reaches the host program."""


class WireFormatError(ToolkeeperError):
    """A provider payload is not in the shape its wire format requires."""


class ApprovalPending(ToolkeeperError):
    """A call waits for a human decision; carries the approval request id."""

    code: ClassVar[str] = "pending"

    def __init__(self, message: str, *, request_id: str) -> None:
        super().__init__(message)
        self.request_id = request_id


class ToolCallError(ToolkeeperError):
    """A call of one tool went wrong; the message is written for the model.

    Attributes:
        code: Stable machine-readable code of the failure.
        tool_name: The tool the call named (as the model spelled it), if known.
        details: Extra data for programs (never needed to understand the message).
    """

    code: ClassVar[str] = "tool_call_error"
    did_run: ClassVar[bool] = False

    def __init__(
        self, message: str, *, tool_name: str | None = None, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.tool_name = tool_name
        self.details = dict(details or {})

    def to_dict(self) -> JsonObject:
        """The error as plain JSON data (code, message, tool, details)."""
        return {
            "code": self.code,
            "message": self.message,
            "tool": self.tool_name,
            "details": self.details,
        }


class ToolDidNotRunError(ToolCallError):
    """The call was refused before the tool ran; nothing happened in the world."""

    code: ClassVar[str] = "did_not_run"


class UnknownToolError(ToolDidNotRunError):
    """No tool has the name the call used."""

    code: ClassVar[str] = "unknown_tool"


class MalformedCallError(ToolDidNotRunError):
    """The call itself is broken (for example its arguments are not valid JSON)."""

    code: ClassVar[str] = "malformed_call"


class InvalidArgumentsError(ToolDidNotRunError, ValueError):
    """The arguments do not match the tool's schema (also a ``ValueError``)."""

    code: ClassVar[str] = "invalid_arguments"


class ToolNotCallableError(ToolDidNotRunError):
    """The tool cannot be run here (a hosted tool runs at the provider)."""

    code: ClassVar[str] = "not_callable"


class GuardrailTrippedError(ToolDidNotRunError):
    """A guardrail refused the call."""

    code: ClassVar[str] = "guardrail_tripped"


class ApprovalDeniedError(ToolDidNotRunError):
    """A human (or the absence of one) refused the call."""

    code: ClassVar[str] = "denied"


class ApprovalExpiredError(ToolDidNotRunError):
    """Nobody decided in time: the request expired and the call did not run. Not a denial —
    the same call made again asks a person anew."""

    code: ClassVar[str] = "expired"


class BudgetExceededError(ToolDidNotRunError):
    """A call budget (per session, tool or namespace) is used up."""

    code: ClassVar[str] = "budget_exceeded"


class PolicyViolationError(ToolDidNotRunError):
    """A security policy rule refused the call; the message names the rule and how to allow it."""

    code: ClassVar[str] = "policy_violation"


class PolicyDeniedError(PolicyViolationError):
    """A policy refused the call (a ``forbid`` applies, or no ``permit`` does); the message names
    the policy's id and its reason."""

    code: ClassVar[str] = "policy_denied"


class CallCancelledError(ToolDidNotRunError):
    """The run was cancelled before the tool started."""

    code: ClassVar[str] = "cancelled"


class ToolFailedError(ToolCallError):
    """The tool ran and failed; it may have had effects before failing."""

    code: ClassVar[str] = "tool_failed"
    did_run: ClassVar[bool] = True


class ToolRaisedError(ToolFailedError):
    """The tool's code raised an exception."""

    code: ClassVar[str] = "tool_raised"


class ToolTimeoutError(ToolFailedError):
    """The tool ran longer than its timeout and was stopped."""

    code: ClassVar[str] = "timeout"


class SandboxLimitError(ToolFailedError):
    """The tool hit a sandbox limit (memory, CPU, processes, output)."""

    code: ClassVar[str] = "sandbox_limit"


class SandboxUnavailableError(ToolDidNotRunError):
    """The sandbox the tool runs its command in could not start, so the command never ran (the
    message carries the sandbox's own reason). Trying again later may work; if it keeps
    failing, ``toolkeeper doctor`` shows what confinement the host has."""

    code: ClassVar[str] = "sandbox_unavailable"


class InvalidOutputError(ToolFailedError):
    """The tool returned a value that does not match its declared output schema."""

    code: ClassVar[str] = "invalid_output"
