"""The context object a tool may ask for by declaring a ``ctx`` parameter."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import CallCancelledError

__all__ = ["ProgressSink", "ToolContext"]

ProgressSink = Callable[[float, float | None, str | None], Awaitable[None] | None]


@dataclass(kw_only=True)
class ToolContext:
    """Per-call information handed to a tool that declares a ``ctx`` parameter.

    The framework injects it; it never appears in the tool's schema and a model cannot set it.

    Attributes:
        call_id: Id of the tool call being executed.
        tool_name: Qualified name of the tool being executed.
        session_id: Id of the invoker session, if the call runs inside one.
        state: Scratch space shared by the calls of one session.
    """

    call_id: str = ""
    tool_name: str = ""
    session_id: str | None = None
    state: dict[str, Any] = field(default_factory=dict)
    progress_sink: ProgressSink | None = None
    cancelled: bool = False

    def cancel(self) -> None:
        """Ask the run to stop: calls not yet started are refused."""
        self.cancelled = True

    def check(self) -> None:
        """Raise ``CallCancelledError`` if the run was cancelled (seed 003's ``ctx.check()``)."""
        if self.cancelled:
            raise CallCancelledError(
                f"the run was cancelled before tool '{self.tool_name or '?'}' started",
                tool_name=self.tool_name or None,
            )

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Report progress to whoever listens (an MCP client, a UI); a no-op otherwise."""
        if self.progress_sink is None:
            return
        outcome = self.progress_sink(progress, total, message)
        if outcome is not None:
            await outcome
