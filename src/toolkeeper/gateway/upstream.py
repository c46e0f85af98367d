"""One upstream MCP server: a client connection opened when first needed, dropped when it fails
and opened again with backoff — never a hang: connecting and every request are bounded, and
while the server is down its tools answer at once with what went wrong and when the next try is.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import anyio
from anyio.abc import TaskGroup

from ..config.model import MCPServerConfig
from ..config.notify import expand_env
from ..errors import ConfigError
from .capped import capped_http, capped_stdio
from .confine import Unconfinable, launch
from .credentials import UpstreamCredentials
from .lean import LeanLink, streamable_http
from .listing import ToolListCheck
from .untrusted import clean
from .upstream_auth import refusal, taken_refusal, upstream_auth

if TYPE_CHECKING:
    import mcp_types as types
    from mcp import Client

__all__ = ["Upstream", "UpstreamError", "UpstreamListener"]

T = TypeVar("T")

BACKOFF_S = (1.0, 2.0, 5.0, 10.0, 30.0)


class UpstreamError(Exception):
    """An upstream MCP server cannot be reached, broke the connection or refused a request;
    its tools turn it into an error result (code ``upstream_unavailable``)."""


class UpstreamListener(Protocol):
    """Who hears what an upstream sends on its own: requests (sampling, elicitation — the
    answer goes back to it) and notifications (log lines, list changes, resource updates)."""

    async def asked(self, config: MCPServerConfig, method: str, params: Any) -> Any: ...

    async def notified(self, config: MCPServerConfig, notification: Any) -> None: ...

    async def reconnected(self, config: MCPServerConfig) -> None:
        """A new connection replaced a broken one: what the old one held (subscriptions) is
        gone, and what it would have announced meanwhile was missed."""
        ...


class Upstream:
    """A connection to one configured MCP server, held by a task in ``group``."""

    def __init__(self, config: MCPServerConfig, group: TaskGroup,
                 listener: UpstreamListener | None = None, *,
                 credentials: UpstreamCredentials | None = None) -> None:
        self.config = config
        self.credentials = credentials
        """Where the OAuth tokens of an upstream with ``oauth`` are kept (sealed)."""
        self.group = group
        self.listener = listener
        self._client: Client | None = None
        self._lean: LeanLink | None = None
        """How a plain call on the live HTTP connection is posted without the SDK's client
        round trip (``gateway.lean``)."""
        self._attempt: anyio.Event | None = None
        self._drop: anyio.Event | None = None
        self._error: str | None = None
        self._refused = False
        self._oauth: Any = None
        """The last failure was an OAuth refusal: its line names the command to run."""
        self._failures = 0
        self._retry_at = 0.0
        self._connections = 0
        self._holds = 0
        """How many connections were begun: only the latest one's end is the upstream's."""
        self._oversized = False
        self.cut: dict[str, str] = {}
        """What the last listing of each kind left out, and why (for the operator)."""
        self.check = ToolListCheck()
        """Tools its last listing left out as invalid, one by one (``check.refused``)."""

    @property
    def name(self) -> str:
        return self.config.name

    def describe(self) -> str:
        cfg = self.config
        return cfg.url or " ".join([cfg.command or "", *cfg.args]).strip()

    async def client(self) -> Client:
        """The live client, connecting first if needed (bounded by ``connect_timeout_s``)."""
        if self._client is not None:
            return self._client
        if self._attempt is None:
            wait = self._retry_at - time.monotonic()
            if wait > 0 and self._refused:
                raise UpstreamError(str(self._error))
            if wait > 0:
                raise UpstreamError(f"MCP server '{self.name}' is unreachable ({self._error}); "
                                    f"next try in {wait:.0f} s")
            self._attempt = attempt = anyio.Event()
            self.group.start_soon(self._hold, attempt)
        else:
            attempt = self._attempt
        with anyio.move_on_after(self.config.connect_timeout_s + 1):
            await attempt.wait()
        client = self.connected()  # set by _hold meanwhile
        if client is None and self._refused:
            raise UpstreamError(str(self._error))
        if client is None:
            raise UpstreamError(f"MCP server '{self.name}' ({self.describe()}) is unreachable: "
                                f"{self._error or 'no answer'}")
        return client

    def connected(self) -> Client | None:
        """The live client, if connected now."""
        return self._client

    async def _hold(self, attempt: anyio.Event) -> None:
        """Open the connection, publish it, and keep it open until it is dropped. A connection
        dropped for a new one (after an answer over the cap) may still be closing when the new
        one is up: what it records as it ends is then no longer the upstream's state."""
        drop = anyio.Event()
        self._holds += 1
        mine = self._holds
        try:
            # The deadline bounds connecting only; it is lifted once connected (the client's
            # own task group must open and close inside this one scope).
            with anyio.CancelScope(deadline=anyio.current_time()
                                   + self.config.connect_timeout_s) as scope:
                async with AsyncExitStack() as stack:
                    client = await self._connect(stack)
                    scope.deadline = math.inf
                    self._client, self._drop, self._error = client, drop, None
                    self._failures = 0
                    self._connections += 1
                    if self._connections > 1 and self.listener is not None:
                        self.group.start_soon(self.listener.reconnected, self.config)
                    attempt.set()
                    await drop.wait()
            if scope.cancelled_caught and self._client is None:
                self._failed(f"no connection within {self.config.connect_timeout_s:g} s")
        except Unconfinable as exc:  # its message names the fix
            if mine == self._holds:
                self._failed(str(exc))
        except Exception as exc:  # every way a connection fails ends up here, once
            refused = self._refusal(exc)
            if mine == self._holds:
                self._failed(refused or _reason(exc), refused=refused is not None)
        finally:
            if mine == self._holds:
                self._client = self._lean = None
            if self._attempt is attempt:
                self._attempt = None
            attempt.set()

    async def _connect(self, stack: AsyncExitStack) -> Client:
        """A new connection's client, in the era the upstream speaks: the 2025-11-25 handshake
        first — an upstream that speaks both keeps the open connection the relay needs (its
        subscriptions, requests and notifications) — and when the upstream refuses it naming
        the 2026-07-28 revisions it serves, a second connection in the SDK's auto mode (it
        discovers the revision, and falls back to the handshake itself). With ``discover``,
        the auto mode at once."""
        if not self.config.discover:
            try:
                async with AsyncExitStack() as first:
                    client = await self._open(first, "legacy")
                    stack.push_async_exit(first.pop_all())
                    return client
            except Exception as exc:
                if not _handshake_refused(exc):
                    raise
        return await self._open(stack, "auto")

    async def _open(self, stack: AsyncExitStack, mode: str) -> Client:
        """The SDK's client over a new transport, in ``mode``; closed with ``stack``. With
        ``logs``, a 2026-07-28 upstream is asked for its log lines on every request (that
        revision sends them only to a request that asks); the handshake's upstream sends
        them unasked."""
        from mcp import Client

        return await stack.enter_async_context(Client(
            await self._transport(stack), mode=mode, cache=None,
            log_level="debug" if self.config.logs else None, **self._callbacks()))

    def _failed(self, reason: str, *, refused: bool = False) -> None:
        self._error, self._refused = reason, refused
        self._retry_at = time.monotonic() + BACKOFF_S[min(self._failures, len(BACKOFF_S) - 1)]
        self._failures += 1

    def drop(self, reason: str) -> None:
        """Forget a broken connection: the next call reconnects (after the backoff)."""
        if self._drop is not None:
            self._drop.set()
            self._drop = None
            self._client = self._lean = None
            self._failed(reason)

    async def close(self) -> None:
        if self._drop is not None:
            self._drop.set()

    def _callbacks(self) -> dict[str, Any]:
        """The client's callbacks: what the upstream asks or tells goes to the listener.
        Sampling and elicitation are declared to the upstream so that, when relaying is off,
        it is refused with the reason (and audited) rather than left to guess."""
        listener, config = self.listener, self.config
        if listener is None:
            return {}

        async def sampling(_ctx: object, params: Any) -> Any:
            return await listener.asked(config, "sampling", params)

        async def elicitation(_ctx: object, params: Any) -> Any:
            return await listener.asked(config, "elicitation", params)

        async def message(message: Any) -> None:
            if not isinstance(message, Exception):
                await listener.notified(config, message)

        return {"sampling_callback": sampling, "elicitation_callback": elicitation,
                "message_handler": message}

    async def _transport(self, stack: AsyncExitStack) -> Any:
        """The transport to the server; what it opens is closed with ``stack``."""
        cfg = self.config
        if cfg.url is not None:
            import httpx2

            headers = {k: expand_env(v, f"mcp server '{cfg.name}' header {k}")
                       for k, v in cfg.headers.items()}
            timeout = httpx2.Timeout(cfg.call_timeout_s, connect=cfg.connect_timeout_s)
            transport = capped_http(cfg.max_result_bytes, self._over, self._seen)
            http = await stack.enter_async_context(httpx2.AsyncClient(
                headers=headers, timeout=timeout, auth=self._auth(), transport=transport))
            return streamable_http(cfg.url, http, self._linked, transport, self.check)
        env = {k: expand_env(v, f"mcp server '{cfg.name}' env {k}") for k, v in cfg.env.items()}
        return capped_stdio(launch(cfg, env), cfg.max_result_bytes, self._over, self.check,
                            name=cfg.name)

    @property
    def lean(self) -> LeanLink | None:
        """The lean path of the live HTTP connection (``gateway.lean``), or None when there
        is none (stdio, or not connected yet). Read-only: for measuring and diagnostics."""
        return self._lean

    def _linked(self, link: LeanLink) -> None:
        self._lean = link

    def _seen(self, request: Any, response: Any) -> None:
        if self._lean is not None:
            self._lean.seen(request, response)

    def _auth(self) -> Any:
        """The OAuth of an upstream with ``oauth`` (the SDK's, over the sealed store)."""
        if self.config.oauth is None:
            return None
        if self.credentials is None:
            raise ConfigError(f"MCP server '{self.name}' uses OAuth, which needs the store its "
                              "tokens are kept in (toolkeeper serve gives it; embedded, pass "
                              "credentials=UpstreamCredentials(store, key))")
        self._oauth = upstream_auth(self.config, self.credentials.storage(self.config))
        return self._oauth

    def _refusal(self, exc: BaseException) -> str | None:
        """The one line of an OAuth failure behind ``exc``, if it is one."""
        if self.config.oauth is None:
            return None
        return refusal(self.name, exc) or taken_refusal(self._oauth)

    def _over(self) -> None:
        """The server sent a message over ``max_result_bytes``: the request waiting fails."""
        self._oversized = True

    async def list_tools(self) -> list[types.Tool]:
        """Every tool the server lists (all pages) whose declaration is valid; the others are
        in ``check.refused``."""
        self.check.refused.clear()
        return await self._list("tools", "tools")

    async def list_resources(self) -> list[types.Resource]:
        return await self._list("resources", "resources")

    async def list_resource_templates(self) -> list[types.ResourceTemplate]:
        return await self._list("resource_templates", "resource_templates")

    async def list_prompts(self) -> list[types.Prompt]:
        return await self._list("prompts", "prompts")

    async def _list(self, what: str, field: str) -> list[Any]:
        """The items of one listing, bounded by ``max_list_pages`` pages, ``max_tools`` items
        and ``list_timeout_s`` in all (each page also by ``call_timeout_s``): what was listed
        within the bounds is kept, and what was cut is said in ``cut[what]``; nothing when the
        server does not offer that capability."""
        client = await self.client()
        capability = {"resources": "resources", "resource_templates": "resources",
                      "prompts": "prompts"}.get(what)
        if capability and getattr(client.server_capabilities, capability, None) is None:
            return []
        cfg, noun = self.config, what.replace("_", " ")
        items: list[Any] = []
        cursor: str | None = None
        self.cut.pop(what, None)
        try:
            with anyio.move_on_after(cfg.list_timeout_s) as listing:
                for _ in range(cfg.max_list_pages):
                    with anyio.fail_after(cfg.call_timeout_s):
                        page = await getattr(client, f"list_{what}")(cursor=cursor,
                                                                     cache_mode="refresh")
                    items += [clean(item) for item in getattr(page, field)]
                    cursor = page.next_cursor
                    if len(items) > cfg.max_tools:
                        self.cut[what] = (f"MCP server '{self.name}' lists more than "
                                          f"{cfg.max_tools} {noun}; the first {cfg.max_tools} "
                                          "are served (raise max_tools to serve more)")
                        return items[:cfg.max_tools]
                    if cursor is None:
                        return items
        except Exception as exc:
            self._broken(exc)
        if listing.cancelled_caught:
            self.cut[what] = (f"MCP server '{self.name}' did not list all its {noun} within "
                              f"{cfg.list_timeout_s:g} s; the {len(items)} listed are served "
                              "(raise list_timeout_s to wait longer)")
        else:
            self.cut[what] = (f"MCP server '{self.name}' lists more than {cfg.max_list_pages} "
                              f"pages of {noun}; the {len(items)} on them are served (raise "
                              "max_list_pages to list more)")
        return items

    async def call(self, name: str, arguments: dict[str, Any], progress: Any = None
                   ) -> types.CallToolResult:
        """Call tool ``name``; ``progress(done, total, message)`` hears its progress. A call
        nobody hears the progress of, on an HTTP connection that can take it, is posted by
        the lean path (``gateway.lean``); any other by the SDK's client. Its text is as the
        upstream sent it: ``RemoteTool`` scrubs it as it becomes the catalog's result."""
        client = await self.client()
        lean = self._lean
        if progress is None and lean is not None and lean.takes(client):
            return await self.bounded(lambda: lean.call(client, name, arguments))
        return await self.bounded(lambda: client.call_tool(name, arguments,
                                                           progress_callback=progress))

    async def request(self, ask: Callable[[Client], Awaitable[T]]) -> T:
        """One request on the live client (``ask(client)``), bounded like a call; the text of
        its answer ``clean``."""
        client = await self.client()
        return clean(await self.bounded(lambda: ask(client)))

    async def bounded(self, send: Callable[[], Awaitable[T]]) -> T:
        try:
            with anyio.fail_after(self.config.call_timeout_s):
                return await send()
        except Exception as exc:
            self._broken(exc)
            raise  # unreachable: _broken raises

    def _broken(self, exc: BaseException) -> None:
        """Turn a failed request into an ``UpstreamError``; a connection fault drops it."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        reason = _reason(exc)
        refused = self._refusal(exc)
        if refused is not None:
            self.drop(refused)
            self._refused = True
            raise UpstreamError(refused) from exc
        if self._oversized:  # the server is up; it answered too much: reconnect at once
            self._oversized = False
            self.drop("answered over the size cap")
            self._failures, self._retry_at, self._attempt = 0, 0.0, None
            limit = self.config.max_result_bytes
            raise UpstreamError(
                f"MCP server '{self.name}' answered more than {limit} bytes, the cap on one "
                f"message from it; raise max_result_bytes under [[mcp.servers]] name = "
                f"\"{self.name}\" to accept more") from exc
        if isinstance(exc, TimeoutError):
            raise UpstreamError(f"MCP server '{self.name}' did not answer within "
                                f"{self.config.call_timeout_s:g} s") from exc
        if isinstance(exc, MCPError) and not (exc.code == CONNECTION_CLOSED
                                               and _found_closed(exc.error.message)):
            raise UpstreamError(f"MCP server '{self.name}' refused the request: {reason}") from exc
        self.drop(reason)
        raise UpstreamError(f"MCP server '{self.name}' connection failed ({reason}); it is "
                            "reconnected on the next call") from exc


CLOSED_MESSAGES = ("Connection closed", "SSE stream ", "the upstream's answer did not carry")
"""How the SDK's client (and the lean path) begin the errors they make up when a connection
turned out closed or broken, all with the code ``CONNECTION_CLOSED`` (-32000). An upstream's
own answer with that code, JSON-RPC's generic server error, answers its call alone: dropping
the connection for it would fail every other call on it, another client's too."""


def _found_closed(message: str) -> bool:
    return message.startswith(CLOSED_MESSAGES)


def _handshake_refused(exc: BaseException) -> bool:
    """Whether a connection failed because the upstream refused the 2025-11-25 handshake as
    a 2026-07-28-only server does: ``-32022``, naming the revisions it serves."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import UNSUPPORTED_PROTOCOL_VERSION

    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return isinstance(exc, MCPError) and exc.code == UNSUPPORTED_PROTOCOL_VERSION


def _reason(exc: BaseException) -> str:
    """One line for an operator, from an exception or the first of an exception group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
