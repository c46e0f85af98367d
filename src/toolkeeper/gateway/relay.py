"""What an upstream says or asks while the gateway relays a call to it, passed on to the client
that made the call — and only to that one.

Our MCP server hands the gateway one ``RelayLink`` per request (who the client is, and how to
log to it, ask it to sample or to fill a form, tell it a resource changed) by running the call
inside ``calling_client(link)``; a relayed tool call registers that link with ``Relay.relaying``
while it waits on the upstream. The protocol (2025-11-25) does not say which of the gateway's
requests an upstream's sampling request, elicitation or log line belongs to, so the relay
attributes it by who is waiting: when every call in flight on that upstream comes from one
client, it is that client's; otherwise nobody's. What is nobody's never reaches a client that
did not cause it: sampling and elicitation are refused, and a log line goes to the server's own
log (the ``toolkeeper.gateway`` logger, for the operator) instead of any client's — it may carry
another client's data.

Sampling and elicitation are off unless the server's config says ``sampling = true`` /
``elicitation = true``; each request is recorded in the audit log (relayed, refused, failed),
under the tool name ``SERVER/sampling`` or ``SERVER/elicitation`` and the id of the relayed
call that caused it. A relayed sampling request loses its ``includeContext`` (an upstream never
reads our client's conversation), an elicitation says which server asks, and the client's
answer is awaited at most ``call_timeout_s``.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import logging
import time
import warnings
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio
import anyio.to_thread

from ..config.model import MCPServerConfig
from ..invoke.audit import AuditEntry, AuditLog, redact_arguments

if TYPE_CHECKING:
    import mcp_types as types

__all__ = ["ClientHub", "ClientSessions", "InFlight", "Relay", "RelayLink", "calling_client",
           "current_client"]

_log = logging.getLogger("toolkeeper.gateway")

Asked = Literal["sampling", "elicitation"]


class RelayLink(Protocol):
    """One request of one of our clients, as the gateway needs it (our MCP server makes one
    per request from its SDK request context)."""

    @property
    def client(self) -> str:
        """The client's name (the ``Caller``'s)."""
        ...

    @property
    def hears_progress(self) -> bool:
        """Whether the client asked to hear this request's progress (a progress token)."""
        ...

    def can(self, asked: Asked) -> bool:
        """Whether this client can be asked now: it declared the capability and the
        connection carries server-to-client requests."""
        ...

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        """A ``notifications/message`` on this request."""
        ...

    async def forward_sampling(self, params: types.CreateMessageRequestParams) -> Any:
        """Send ``sampling/createMessage`` to the client; its result (or raise ``MCPError``)."""
        ...

    async def forward_elicitation(self, params: types.ElicitRequestParams) -> Any:
        """Send ``elicitation/create`` to the client; its result (or raise ``MCPError``)."""
        ...

    async def resource_updated(self, uri: str) -> None:
        """``notifications/resources/updated`` on the client's connection (a subscription
        outlives the request that made it)."""
        ...


class ClientHub(Protocol):
    """Every connected client: where what concerns them all is announced."""

    async def log(self, level: str, data: Any, logger: str | None) -> None: ...

    async def resources_changed(self) -> None: ...

    async def prompts_changed(self) -> None: ...


class ClientSession(Protocol):
    """A connection's way to its client, as our MCP server's SDK hands it out per request (the
    SDK's ``ServerSession``): what is sent on it goes on the connection, not on a request."""

    async def send_log_message(self, level: Any, data: Any, logger: str | None = None) -> None:
        ...

    async def send_resource_list_changed(self) -> None: ...

    async def send_prompt_list_changed(self) -> None: ...


class ClientSessions:
    """The ``ClientHub`` a gateway has unless given another: the last connection our MCP server
    saw of each client (``remember``, called by the server for each request that may outlive
    it); what concerns them all goes to each, and a connection that is closed is forgotten."""

    def __init__(self) -> None:
        self._kept: dict[str, ClientSession] = {}
        self._listeners: list[Callable[[str], Awaitable[None]]] = []

    def remember(self, client: str, session: ClientSession) -> None:
        self._kept[client] = session

    def listen(self, told: Callable[[str], Awaitable[None]]) -> None:
        """Also tell ``told`` (a server's ``subscriptions/listen`` streams, where 2026-07-28
        clients hear changes) that the upstreams' ``resources`` or ``prompts`` changed."""
        self._listeners.append(told)

    async def _each(self, send: Callable[[ClientSession], Awaitable[None]]) -> None:
        for client, session in list(self._kept.items()):
            try:
                await send(session)
            except Exception:  # that connection is closed: forget it
                self._kept.pop(client, None)

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        from mcp.shared.exceptions import MCPDeprecationWarning

        with warnings.catch_warnings():  # logging is deprecated in 2026-07-28, current before
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await self._each(lambda session: session.send_log_message(level, data, logger))

    async def resources_changed(self) -> None:
        for told in self._listeners:
            await told("resources")
        await self._each(lambda session: session.send_resource_list_changed())

    async def prompts_changed(self) -> None:
        for told in self._listeners:
            await told("prompts")
        await self._each(lambda session: session.send_prompt_list_changed())


_CALLING: contextvars.ContextVar[RelayLink | None] = contextvars.ContextVar(
    "toolkeeper_calling_client", default=None)


@contextmanager
def calling_client(link: RelayLink | None) -> Iterator[None]:
    """Run a request of our server's client (a ``tools/call``) with ``link`` as the client a
    relayed call reports to and asks."""
    token = _CALLING.set(link)
    try:
        yield
    finally:
        _CALLING.reset(token)


def current_client() -> RelayLink | None:
    """The link of the request being served, if our server set one."""
    return _CALLING.get()


@dataclass(frozen=True, kw_only=True)
class InFlight:
    """A relayed call waiting on its upstream."""

    call_id: str
    session_id: str
    tool: str
    link: RelayLink | None


class Relay:
    """Calls in flight per upstream, and the upstream's requests and log lines they cause."""

    def __init__(self, *, audit: AuditLog | None = None, hub: ClientHub | None = None) -> None:
        self.audit = audit
        self.hub: ClientHub = hub if hub is not None else ClientSessions()
        """Where what concerns every client goes (by default the clients our server saw)."""
        self._flying: dict[str, list[InFlight]] = {}

    @contextmanager
    def relaying(self, server: str, call: InFlight) -> Iterator[None]:
        """Mark ``call`` as waiting on ``server`` for as long as the block runs."""
        flying = self._flying.setdefault(server, [])
        flying.append(call)
        try:
            yield
        finally:
            flying.remove(call)

    def cause(self, server: str) -> InFlight | None:
        """The call an upstream's request belongs to: the latest in flight on ``server`` when
        every call in flight there comes from one client with a link; else None."""
        flying = self._flying.get(server) or []
        clients = {(c.session_id, c.link.client if c.link else None) for c in flying}
        if len(clients) != 1 or flying[-1].link is None:
            return None
        return flying[-1]

    async def log(self, server: str, params: types.LoggingMessageNotificationParams) -> None:
        """An upstream's log line: to the client whose call caused it, named after the upstream;
        else to the server's own log only."""
        logger = f"{server}/{params.logger}" if params.logger else server
        cause = self.cause(server)
        if cause is None or cause.link is None:
            _log.info("upstream %s said (%s, no single client's call in flight): %s", logger,
                      params.level, str(params.data)[:2000])
            return
        try:
            await cause.link.log(params.level, params.data, logger)
        except Exception:  # a client gone meanwhile: a log line is not worth a failure
            return

    async def ask(self, config: MCPServerConfig, asked: Asked, params: Any) -> Any:
        """An upstream's sampling or elicitation request: relayed to the client whose call
        caused it when the server's config allows it, else refused; audited either way.
        Returns the client's result or an ``ErrorData`` for the upstream."""
        import mcp_types as types
        from mcp.shared.exceptions import MCPError

        started = time.monotonic()
        cause = self.cause(config.name)
        allowed = config.sampling if asked == "sampling" else config.elicitation
        refusal = None
        if not allowed:
            refusal = ("relay_off", f"toolkeeper does not relay {asked} requests from MCP server "
                       f"'{config.name}': its operator has not enabled it ({asked} = true in "
                       "its [[mcp.servers]] entry)")
        elif cause is None or cause.link is None:
            refusal = ("no_client", f"toolkeeper cannot tell which client this {asked} request "
                       f"of MCP server '{config.name}' is for (it relays one only during a "
                       "call of one client's)")
        elif not cause.link.can(asked):
            refusal = ("client_cannot", f"the client '{cause.link.client}' cannot be asked "
                       f"for {asked} (it did not declare it, or its connection carries no "
                       "requests from the server)")
        if refusal is not None:
            await self._record(config.name, asked, cause, params, "refused", refusal[0], started)
            return types.ErrorData(code=types.INVALID_REQUEST, message=refusal[1])
        assert cause is not None and cause.link is not None
        try:
            with anyio.fail_after(config.call_timeout_s):
                if asked == "sampling":
                    result = await cause.link.forward_sampling(_no_context(params))
                else:
                    result = await cause.link.forward_elicitation(_attributed(config, params))
        except (MCPError, TimeoutError) as exc:
            code = "client_timeout" if isinstance(exc, TimeoutError) else "client_error"
            await self._record(config.name, asked, cause, params, "error", code, started)
            answer = (f"no answer within {config.call_timeout_s:g} s"
                      if isinstance(exc, TimeoutError) else f"the client answered: {exc}")
            return types.ErrorData(code=getattr(exc, "code", types.INTERNAL_ERROR),
                                   message=answer)
        status = getattr(result, "action", None) if asked == "elicitation" else "ok"
        await self._record(config.name, asked, cause, params, str(status or "ok"), None, started)
        return result

    async def _record(self, server: str, asked: Asked, cause: InFlight | None, params: Any,
                      status: str, code: str | None, started: float) -> None:
        if self.audit is None:
            return
        shown = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        if cause is not None:
            shown = {"tool": cause.tool, "client": cause.link.client if cause.link else None,
                     **shown}
        redacted = redact_arguments(shown)
        arguments = redacted if isinstance(redacted, dict) else {}
        digest = hashlib.sha256(json.dumps(shown, sort_keys=True, default=str).encode()
                                ).hexdigest()
        entry = AuditEntry(ts=time.time(), call_id=cause.call_id if cause else "",
                           session_id=cause.session_id if cause else "",
                           tool=f"{server}/{asked}", args_digest=digest, arguments=arguments,
                           status=status, error_code=code,
                           duration_ms=(time.monotonic() - started) * 1000)
        await anyio.to_thread.run_sync(self.audit.record, entry)


def _no_context(params: Any) -> Any:
    """A sampling request as our client gets it: without ``includeContext`` — an upstream
    never gets our client's conversation (with it, ``allServers`` would be every server's)."""
    return params.model_copy(update={"include_context": None})


def _attributed(config: MCPServerConfig, params: Any) -> Any:
    """An elicitation as our client's user sees it: saying which server asks."""
    return params.model_copy(update={
        "message": f"MCP server '{config.name}' asks: {params.message}"})
