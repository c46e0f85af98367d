"""The context object a tool may ask for by declaring a ``ctx`` parameter."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Literal, Protocol

from ..errors import CallCancelledError, UsageError
from .json import JsonObject

__all__ = ["CALLER_KEY", "LIBRARY", "OPERATOR", "STDIO_CLIENT", "Caller", "Channel", "ClientLink",
           "LogLevel", "ProgressSink", "ToolContext"]

OPERATOR = "operator"
"""The client name of the person who decides (the page, the decision API, the CLI)."""
STDIO_CLIENT = "stdio"
"""The client of an MCP server without an HTTP layer naming one: the process that launched it."""
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
        tools: The tools it may see and call, as name patterns (``fnmatch`` globs:
            ``get_forecast``, ``github-*``); ``None``: every tool. An OAuth access token's
            scopes decide it (``[server.oauth.scopes]``); a client token grants every tool.
        subject: Who stands behind the credential when it says (an access token's client
            and ``sub``, as ``oauth:CLIENT:SUB``; a named operator token's name), for the
            record of what they decided.
    """

    client: str = ""
    channel: Channel = "library"
    via: Literal["bearer", "cookie", "none"] = "none"
    page_secret: str = field(default="", repr=False)
    tools: tuple[str, ...] | None = None
    subject: str = ""
    scopes: tuple[str, ...] = ()
    """An OAuth access token's scopes, sorted (empty for every other credential)."""

    @property
    def is_operator(self) -> bool:
        return self.client == OPERATOR

    def may_use(self, name: str) -> bool:
        """Whether this caller may see and call the tool ``name``."""
        return self.tools is None or any(fnmatchcase(name, p) for p in self.tools)

    def through(self, channel: Channel) -> Caller:
        """The same caller, through another door (a code-mode script's calls: the same
        tools, never more)."""
        return Caller(client=self.client, channel=channel, via=self.via, tools=self.tools,
                      subject=self.subject, scopes=self.scopes)


LIBRARY = Caller()
"""A call made by a program of your own, with no client in front of it."""

ProgressSink = Callable[[float, float | None, str | None], Awaitable[None] | None]
LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert",
                   "emergency"]


class ClientLink(Protocol):
    """What a tool may ask of the client in front of the call (an MCP client): log lines, a
    completion from its model (sampling), an answer from its user (elicitation)."""

    def can(self, capability: str) -> bool: ...

    async def log(self, level: LogLevel, data: object, logger: str | None) -> None: ...

    async def sample(self, prompt: str, *, max_tokens: int, system: str | None,
                     key: str | None) -> str: ...

    async def elicit(self, message: str, schema: JsonObject, *,
                     key: str | None) -> JsonObject: ...

    async def list_roots(self, *, key: str | None) -> list[JsonObject]: ...


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
    client: ClientLink | None = None
    protocol: str = ""
    """The MCP protocol revision the request speaks (``2025-11-25``); empty outside MCP."""
    era: str = ""
    """Its era: ``handshake`` (a session opened by ``initialize``) or ``per-request`` (each
    request says its revision: 2026-07-28 and later); empty outside MCP."""

    def cancel(self) -> None:
        """Ask the run to stop: calls not yet started are refused."""
        self.cancelled = True

    def check(self) -> None:
        """Raise ``CallCancelledError`` if the run was cancelled: a long tool calls it between
        steps to stop early."""
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

    async def log(self, message: object, *, level: LogLevel = "info",
                  logger: str | None = None) -> None:
        """Send a log line to the client (MCP ``notifications/message``, at or above the level
        the client asked for); a no-op without a client."""
        if self.client is not None:
            await self.client.log(level, message, logger)

    def client_can(self, capability: str) -> bool:
        """Whether the client declared ``capability`` (``sampling``, ``elicitation``,
        ``roots``); False without a client."""
        return self.client is not None and self.client.can(capability)

    async def sample(self, prompt: str, *, max_tokens: int = 512, system: str | None = None,
                     key: str | None = None) -> str:
        """Ask the client's model for a completion of ``prompt`` (MCP sampling); its text.

        On a 2026-07-28 connection the call answers an ``input_required`` result and runs
        again with the answer (under ``key``; asks made together with ``asyncio.gather`` go in
        one round). Each request is recorded in the audit log."""
        return await self._link("sample").sample(prompt, max_tokens=max_tokens, system=system,
                                                 key=key)

    async def elicit(self, message: str, schema: JsonObject, *,
                     key: str | None = None) -> JsonObject:
        """Ask the client's user to fill a form (MCP elicitation; ``schema`` is a flat JSON
        Schema object): ``{"action": "accept" | "decline" | "cancel", "content": {...}}``.
        Asked the way ``sample`` asks."""
        return await self._link("elicit").elicit(message, schema, key=key)

    async def list_roots(self, *, key: str | None = None) -> list[JsonObject]:
        """The client's roots (``[{"uri": ..., "name": ...}]``), asked the way ``sample``
        asks."""
        return await self._link("list_roots").list_roots(key=key)

    async def as_task(self) -> None:
        """Go on as an MCP task (a tool declared with ``task_start="tool"``): the call is
        answered at once with the task, which the client polls for the result this run
        returns. What the tool asked the client before is asked in input rounds, as any call
        asks. A no-op for a client without tasks, or without a client."""
        escalate = getattr(self.client, "as_task", None)
        if escalate is not None:
            await escalate()

    def _link(self, what: str) -> ClientLink:
        if self.client is None:
            raise UsageError(f"ctx.{what}() needs an MCP client in front of the call (the "
                             f"tool '{self.tool_name}' runs without one): serve it with "
                             "toolkeeper serve, or catch this error")
        return self.client
