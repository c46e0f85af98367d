"""The context object a tool may ask for by declaring a ``ctx`` parameter."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from ..errors import CallCancelledError

__all__ = ["CALLER_KEY", "LIBRARY", "OPERATOR", "Caller", "Channel", "ProgressSink",
           "ToolContext"]

OPERATOR = "operator"
"""The client name of the person who decides (the page, the decision API, the CLI)."""
CALLER_KEY = "toolkeeper_caller"
"""Where the HTTP face puts the request's ``Caller`` (the ASGI scope's ``state``)."""
Channel = Literal["library", "mcp", "api", "page", "cli", "code_mode"]


@dataclass(frozen=True, kw_only=True)
class Caller:
    """Who makes a call or a request: the same object the HTTP face, the MCP server, code mode
    and the approval pages read.

    Attributes:
        client: The client's name (``default``, a token's name, ``stdio``, ``anonymous``), the
            operator's (``operator``), or empty in a library run.
        channel: The door it came through.
        via: How it proved who it is (``bearer``, ``cookie``, ``none``).
        page_secret: The approval page's session secret (its forms' CSRF token derives from
            it); never shown.
    """

    client: str = ""
    channel: Channel = "library"
    via: Literal["bearer", "cookie", "none"] = "none"
    page_secret: str = field(default="", repr=False)

    @property
    def is_operator(self) -> bool:
        return self.client == OPERATOR

    def through(self, channel: Channel) -> Caller:
        """The same caller, through another door (a code-mode script's calls)."""
        return Caller(client=self.client, channel=channel, via=self.via)


LIBRARY = Caller()
"""A call made by a program of your own, with no client in front of it."""

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
        caller: Who makes the call.
    """

    call_id: str = ""
    tool_name: str = ""
    session_id: str | None = None
    caller: Caller = LIBRARY
    state: dict[str, object] = field(default_factory=dict)
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
