"""``ToolCall``: one call a model (or a client) asked for."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["CallProblem", "ToolCall"]


@dataclass(frozen=True, kw_only=True, slots=True)
class CallProblem:
    """Why a parsed call cannot run as it stands (e.g. its arguments were not JSON)."""

    code: str
    message: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCall:
    """A request to run one tool.

    Attributes:
        id: The provider's call id (echoed back in the result message).
        name: The tool's qualified name (wire names are mapped back before this is built).
        arguments: The decoded arguments.
        wire_name: The name exactly as the provider sent it.
        raw_arguments: The arguments as received, when they came as a JSON string.
        problem: Set when the call is malformed; the invoker answers it with an error result.
        api_format: The wire format the call came from, if any.
        call_type: For a provider-defined tool's call, the provider's item type it came as
            (``computer_call``, ``apply_patch_call``…; its result goes back as the matching
            ``…_output`` item); ``None`` for a function call.
    """

    id: str
    name: str
    arguments: dict[str, object] = field(default_factory=dict)
    wire_name: str | None = None
    raw_arguments: str | None = None
    problem: CallProblem | None = None
    api_format: str | None = None
    call_type: str | None = None

    @property
    def is_malformed(self) -> bool:
        return self.problem is not None
