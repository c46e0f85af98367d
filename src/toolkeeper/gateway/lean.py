"""A plain relayed ``tools/call`` to an upstream over Streamable HTTP, posted by the gateway
itself: the lean path.

The SDK's client sends a request through a memory stream to its transport's writer task, which
starts a task per request to post it, hands the answer back through another memory stream to
the session's receive loop, which wakes the caller waiting on its own memory stream: a whole
client round trip, about as long as the upstream's call itself. The lean path keeps the SDK's
parts that decide what goes on the wire and what an answer means, and drops the hand-overs:

- the connection is the SDK client's (``streamable_http`` below opens it as the SDK does and
  keeps its transport at hand): its session id, negotiated revision, headers, authorization,
  the httpx client with its kept-alive connections and the gateway's cap on answer sizes;
- the request is the one the SDK's session would send (its own stamp gives the headers), with
  an id of the gateway's own (a string: never one the session mints);
- the answer is read by the SDK transport's own POST handling (a JSON body, an event stream,
  a redirect, ``202``, a JSON-RPC error at a 4xx status, ``404`` for a session gone, another
  content type, a stream to resume), in the calling task;
- whatever the answer stream carries besides the answer — a log line, a list change, the
  upstream's sampling or elicitation request — goes to the SDK session exactly as its own
  transport would hand it over: the relay hears and answers it as before;
- the result is checked as the SDK's session checks it (the revision's result, the
  ``CallToolResult`` model, the tool's output schema);
- a call cancelled or timed out tells the upstream with ``notifications/cancelled``, as the
  SDK's session does.

The gateway takes it only for a call whose client hears no progress (no progress token to
relay) on a connection that negotiated the 2025-11-25 handshake; everything else — a call with
progress, a 2026-07-28 connection, a stdio upstream, listing, reading, prompts, the upstream's
own stream — is the SDK client's. Once posted, a call is never posted again: a failure is the
call's answer, as it is on the SDK's path.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    import mcp_types as types
    from mcp import Client

__all__ = ["LeanLink", "streamable_http"]

CANCEL_WRITE_S = 2.0
"""Seconds a cancelled call's ``notifications/cancelled`` may take to go out."""


class _Answer:
    """What the SDK transport's POST handling hands over for one lean call: the answer to it
    kept here, anything else passed on to the SDK session."""

    def __init__(self, request_id: str, inbound: Any) -> None:
        self.request_id = request_id
        self.inbound = inbound
        self.outcome: Any = None

    async def send(self, item: Any) -> None:
        from mcp_types import JSONRPCError, JSONRPCResponse

        message = getattr(item, "message", None)
        if (isinstance(message, JSONRPCResponse | JSONRPCError)
                and message.id == self.request_id):
            self.outcome = message
            return
        await self.inbound.send(item)


class LeanLink:
    """One connection's way to post a plain ``tools/call`` itself (see the module's doc)."""

    def __init__(self, transport: Any, http: Any, inbound: Any) -> None:
        self.transport = transport
        self.http = http
        self.inbound = inbound
        self._ids = itertools.count(1)

    def takes(self, client: Client) -> bool:
        """Whether a call on ``client`` can take the lean path: its session negotiated the
        2025-11-25 handshake (the 2026-07-28 revision's calls carry an envelope, input rounds
        and header checks the SDK's client drives)."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        version = client.session.protocol_version
        return version is not None and version not in MODERN_PROTOCOL_VERSIONS

    async def call(self, client: Client, name: str, arguments: dict[str, Any]
                   ) -> types.CallToolResult:
        """Call tool ``name`` on the upstream; raises ``MCPError`` for an error answer, as the
        SDK's client does."""
        from mcp.shared.exceptions import MCPError

        session = client.session
        request_id = f"toolkeeper-{next(self._ids)}"
        answer = _Answer(request_id, self.inbound)
        context = self._context(session, request_id, name, arguments, answer)
        try:
            await self.transport._handle_post_request(context)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_WRITE_S):
                await _cancelled(session, request_id)
            raise
        outcome = answer.outcome
        if outcome is None:
            from mcp_types import CONNECTION_CLOSED

            raise MCPError(code=CONNECTION_CLOSED, message="the upstream's answer did not "
                                                           "carry the call's result")
        error = getattr(outcome, "error", None)
        if error is not None:
            raise MCPError(code=error.code, message=error.message, data=error.data)
        return await _result(session, name, outcome.result)

    def _context(self, session: Any, request_id: str, name: str, arguments: dict[str, Any],
                 answer: _Answer) -> Any:
        """The SDK transport's context for posting the call as the session would send it."""
        import mcp_types as types
        from mcp.client.streamable_http import RequestContext
        from mcp.shared._otel import inject_trace_context
        from mcp.shared.message import ClientMessageMetadata, SessionMessage

        data = types.CallToolRequest(params=types.CallToolRequestParams(
            name=name, arguments=arguments)).model_dump(by_alias=True, mode="json",
                                                        exclude_none=True)
        opts: dict[str, Any] = {}
        session._stamp(data, opts)
        params = dict(data.get("params") or {})
        meta = dict(params.get("_meta") or {})
        inject_trace_context(meta)
        if meta:
            params["_meta"] = meta
        message = types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method="tools/call",
                                       params=params)
        metadata = ClientMessageMetadata(headers=opts.get("headers"))
        return RequestContext(client=self.http, session_id=self.transport.session_id,
                              session_message=SessionMessage(message, metadata=metadata),
                              metadata=metadata,
                              read_stream_writer=answer)  # type: ignore[arg-type]  # its send


async def _cancelled(session: Any, request_id: str) -> None:
    """Tell the upstream a call it may have started is abandoned (the SDK's courtesy cancel)."""
    import mcp_types as types

    with contextlib.suppress(Exception):
        await session.send_notification(types.CancelledNotification(
            params=types.CancelledNotificationParams(request_id=request_id,
                                                     reason="caller cancelled")))


async def _result(session: Any, name: str, raw: dict[str, Any]) -> types.CallToolResult:
    """A call's result as the SDK's session makes it: checked against the negotiated
    revision, a later revision's fields dropped, the result model, the output schema."""
    import mcp_types as types
    from mcp.client.session import _clamp_inbound_ttl, _later_revision_fields
    from mcp_types import methods

    _clamp_inbound_ttl(raw)
    version = session.protocol_version or "2025-11-25"
    with contextlib.suppress(KeyError):
        methods.validate_server_result("tools/call", version, raw)
    if not (foreign := _later_revision_fields("tools/call", version)).isdisjoint(raw):
        raw = {key: value for key, value in raw.items() if key not in foreign}
    result = session._call_tool_adapter.validate_python(raw, by_name=False)
    if not isinstance(result, types.CallToolResult):
        raise RuntimeError(f"tools/call answered {type(result).__name__}, which a "
                           "2025-11-25 session does not take")
    if not result.is_error:
        await session.validate_tool_result(name, result)
    return result


@contextlib.asynccontextmanager
async def streamable_http(url: str, http: Any, linked: Callable[[LeanLink], None]
                          ) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's Streamable HTTP client transport over ``http``, opened as the SDK's
    ``streamable_http_client`` opens it, and its ``LeanLink`` handed to ``linked``."""
    from mcp.client.streamable_http import StreamableHTTPTransport
    from mcp.shared._compat import resync_tracer
    from mcp.shared._context_streams import create_context_streams
    from mcp.shared.message import SessionMessage

    transport = StreamableHTTPTransport(url)
    inbound, read_stream = create_context_streams[SessionMessage | Exception](0)
    write_stream, outbound = create_context_streams[SessionMessage](0)
    async with inbound, read_stream, write_stream, outbound, anyio.create_task_group() as tg:

        def start_get_stream() -> None:
            tg.start_soon(transport.handle_get_stream, http, inbound)

        tg.start_soon(transport.post_writer, http, outbound, inbound, write_stream,
                      start_get_stream, tg)
        linked(LeanLink(transport, http, inbound))
        try:
            yield read_stream, write_stream
        finally:
            if transport.session_id:
                await transport.terminate_session(http)
            tg.cancel_scope.cancel()
    await resync_tracer()
