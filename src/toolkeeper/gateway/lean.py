"""A plain relayed ``tools/call`` to an upstream over Streamable HTTP, posted by the gateway
itself: the lean path.

The SDK's client sends a request through a memory stream to its transport's writer task, which
starts a task per request to post it and hands the answer back through another memory stream
to the session's receive loop, which wakes the caller waiting on a memory stream of its own: a
whole client round trip, about as long as the upstream's call itself. The lean path posts the
call in the calling task, on the SDK client's own connection:

- the httpx client is the one the SDK's transport was given: the configured headers, the
  upstream's OAuth, the kept-alive connections and the cap on answer sizes; a call on a client
  with no auth, no cookies and no event hooks is handed to that client's transport itself
  (the request built as the client builds it, its headers merged once), which skips the
  client's layers for auth, redirects and cookies that have nothing to do for it;
- the request carries what the SDK's own requests on that connection carry (``LeanLink.seen``
  hears each of them: the session id, the protocol version), with an id of the gateway's own
  (a string: never one the SDK's session mints);
- the answer is read as the SDK's transport reads it — a JSON body, or an event stream whose
  messages before the answer (a log line, a list change, the upstream's sampling or
  elicitation request) go to the SDK's session exactly as its transport hands them over, so
  the relay hears and answers them as before — and what the SDK's transport makes of a ``202``,
  an error status (a JSON-RPC error in its body, ``404`` for a session the upstream forgot), a
  body that is not JSON-RPC or another content type, the lean path makes too;
- the result is checked as the SDK's session checks it (the revision's result, the
  ``CallToolResult`` model, the tool's output schema);
- a call cancelled or timed out tells the upstream with ``notifications/cancelled``, as the
  SDK's session does.

The gateway takes it only for a call whose client hears no progress (no progress token to
relay), on a connection that negotiated the 2025-11-25 handshake and whose requests the
upstream never redirected; everything else — a call with progress, a 2026-07-28 connection, a
stdio upstream, listing, reading, prompts, the upstream's own stream — is the SDK client's.
Once posted, a call is never posted again: whatever follows is the call's answer.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import ValidationError

from .http11 import LEAN
from .listing import ToolListCheck, Watched

if TYPE_CHECKING:
    import mcp_types as types
    from mcp import Client

__all__ = ["LeanLink", "streamable_http"]

CANCEL_WRITE_S = 2.0
"""Seconds a cancelled call's ``notifications/cancelled`` may take to go out."""
RESUME_TRIES = 2
"""Failed tries to resume an answer's event stream before the call fails (the SDK's own)."""
SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"


class LeanLink:
    """One connection's way to post a plain ``tools/call`` itself (see the module's doc):
    ``http`` the SDK transport's httpx client, ``inbound`` the stream the SDK's session reads
    what the upstream sends."""

    def __init__(self, url: str, http: Any, inbound: Any, transport: Any = None) -> None:
        self.url = url
        self.http = http
        self.inbound = inbound
        self.transport = transport
        """``http``'s own transport, when known: plain calls go to it directly."""
        self.session_id: str | None = None
        self.redirected = False
        self._ids = itertools.count(1)
        self._target: Any = None

    def seen(self, request: Any, response: Any) -> None:
        """A POST of the SDK's on this connection and its answer's head: its session id is
        the one to send, and a redirect keeps this connection off the lean path."""
        if (named := request.headers.get(SESSION_HEADER)) is not None:
            self.session_id = named
        elif (given := response.headers.get(SESSION_HEADER)) is not None:
            self.session_id = given
        if 300 <= response.status_code < 400:
            self.redirected = True

    def takes(self, client: Client) -> bool:
        """Whether a call on ``client`` can take the lean path: its session negotiated the
        2025-11-25 handshake (a 2026-07-28 call carries an envelope, input rounds and header
        checks the SDK's client drives) and no request of it was redirected."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        version = client.session.protocol_version
        return (version is not None and version not in MODERN_PROTOCOL_VERSIONS
                and not self.redirected)

    async def call(self, client: Client, name: str, arguments: dict[str, Any]
                   ) -> types.CallToolResult:
        """Call tool ``name`` on the upstream; raises ``MCPError`` for an error answer, as the
        SDK's client does."""
        import mcp_types as types
        from mcp.shared.exceptions import MCPError

        session = client.session
        version = session.protocol_version or ""
        request_id = f"toolkeeper-{next(self._ids)}"
        headers = {"accept": "application/json, text/event-stream",
                   "content-type": "application/json", VERSION_HEADER: version}
        if self.session_id:
            headers[SESSION_HEADER] = self.session_id
        try:
            outcome = await self._post(_request(request_id, name, arguments), headers,
                                       request_id)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_WRITE_S):
                await _cancelled(session, request_id)
            raise
        if isinstance(outcome, types.JSONRPCError):
            error = outcome.error
            raise MCPError(code=error.code, message=error.message, data=error.data)
        return await _result(session, name, version, outcome.result)

    async def _post(self, body: bytes, headers: dict[str, str], request_id: str) -> Any:
        """The call's answer (a ``JSONRPCResponse`` or ``JSONRPCError``), what the stream
        carries besides it handed to the SDK's session."""
        def resume(last_id: str) -> Any:
            return self.http.stream("GET", self.url, headers={
                **headers, "accept": "text/event-stream", "last-event-id": last_id})

        if not self._direct():
            async with self.http.stream("POST", self.url, content=body, headers=headers,
                                        extensions={LEAN: True}) as response:
                return await answer_of(response, request_id, self.session_id is not None,
                                       self.inbound, resume)
        response = await self._send(body, headers)
        try:
            return await answer_of(response, request_id, self.session_id is not None,
                                   self.inbound, resume)
        finally:
            await response.aclose()

    def _direct(self) -> bool:
        """Whether a call may skip the httpx client's layers: nothing in them would act on it
        (no auth to add or answer, no cookie to send, no hook to run, no redirect to follow,
        no query parameters to add)."""
        http = self.http
        hooks = http.event_hooks
        return (self.transport is not None and http.auth is None and not http.cookies
                and not hooks["request"] and not hooks["response"]
                and not http.follow_redirects and not http.params)

    async def _send(self, body: bytes, headers: dict[str, str]) -> Any:
        """The POST handed to the client's transport, built as the client builds it (its
        headers under the call's, its timeouts); the answer's cookies kept as it keeps them."""
        import httpx2

        if self._target is None:
            self._target = httpx2.URL(self.url)
        merged = httpx2.Headers(self.http.headers)
        merged.update(headers)
        request = httpx2.Request("POST", self._target, content=body, headers=merged,
                                 extensions={LEAN: True, "timeout": self.http.timeout.as_dict()})
        response = await self.transport.handle_async_request(request)
        response.request = request
        self.http.cookies.extract_cookies(response)
        return response


def _request(request_id: str, name: str, arguments: dict[str, Any]) -> bytes:
    """The call's JSON-RPC request, as the SDK's model writes it (compact, UTF-8 as is; a
    float may be spelled otherwise, the same number): one ``json.dumps`` of the envelope. What
    plain JSON cannot say (a NaN, a lone surrogate) is left to the model, as before."""
    envelope = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                "params": {"name": name, "arguments": arguments}}
    try:
        return json.dumps(envelope, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False).encode()
    except (TypeError, ValueError):
        import mcp_types as types

        return types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method="tools/call",
                                    params=envelope["params"]).model_dump_json(
            by_alias=True, exclude_unset=True).encode()


async def answer_of(response: Any, request_id: str, in_session: bool, inbound: Any,
                    resume: Any) -> Any:
    """What the SDK's transport makes of the answer to a request it posted: the request's
    ``JSONRPCResponse`` or ``JSONRPCError`` (one it makes up for a status or a body it cannot
    take, in the SDK's words); what an event stream carries before it goes to ``inbound``."""
    import mcp_types as types

    def error(code: int, message: str) -> types.JSONRPCError:
        return types.JSONRPCError(jsonrpc="2.0", id=request_id,
                                  error=types.ErrorData(code=code, message=message))

    status = response.status_code
    if status == 202:
        return error(types.INVALID_REQUEST, "server answered a request with 202 Accepted")
    if 300 <= status < 400:
        return error(types.INVALID_REQUEST, f"Redirect to {response.headers.get('location')} "
                     "not followed; use that URL as the endpoint if it is the intended server")
    content_type = response.headers.get("content-type", "").lower()
    if status >= 400:
        return await _refused(response, content_type, in_session, error)
    if content_type.startswith("application/json"):
        return await _json(response, request_id, error)
    if content_type.startswith("text/event-stream"):
        return await _streamed(response, request_id, inbound, error, resume)
    return error(types.INVALID_REQUEST, f"Unexpected content type: {content_type}")


async def _refused(response: Any, content_type: str, in_session: bool,
                   error: Callable[[int, str], Any]) -> Any:
    """An error status: the JSON-RPC error its body carries, else one the status means."""
    import httpx2
    import mcp_types as types

    if content_type.startswith("application/json"):
        try:
            parsed = types.jsonrpc_message_adapter.validate_json(await response.aread(),
                                                                 by_name=False)
            if isinstance(parsed, types.JSONRPCError):
                return error(parsed.error.code, parsed.error.message).model_copy(
                    update={"error": parsed.error})
        except (httpx2.StreamError, ValidationError):
            pass
    if response.status_code == 404:
        return (error(types.INVALID_REQUEST, "Session terminated") if in_session
                else error(types.METHOD_NOT_FOUND, "Not Found"))
    return error(types.INTERNAL_ERROR, "Server returned an error response")


async def _json(response: Any, request_id: str, error: Callable[[int, str], Any]) -> Any:
    import httpx2
    import mcp_types as types

    try:
        message = types.jsonrpc_message_adapter.validate_json(await response.aread(),
                                                              by_name=False)
    except (httpx2.StreamError, ValidationError) as exc:
        return error(types.PARSE_ERROR, f"Failed to parse JSON response: {exc}")
    return _ours(message, request_id, error)


class _Events:
    """Where an event stream got to: its last event's id and the wait it asked for."""

    last_id: str | None = None
    retry_ms: int | None = None


async def _streamed(response: Any, request_id: str, inbound: Any,
                    error: Callable[[int, str], Any], resume: Any) -> Any:
    """An event stream: its messages before the answer go to the SDK's session; a stream that
    ends without the answer is resumed from its last event as the SDK's transport resumes it
    (a ``GET`` with ``Last-Event-ID`` after the wait it asked for, twice at most)."""
    import mcp_types as types

    where = _Events()
    answer = await _events(response, request_id, inbound, error, where)
    failed = 0
    while answer is None and where.last_id is not None and failed < RESUME_TRIES:
        await anyio.sleep((where.retry_ms if where.retry_ms is not None else 1000) / 1000)
        try:
            async with resume(where.last_id) as again:
                kind = again.headers.get("content-type", "").partition(";")[0].strip().lower()
                if again.status_code >= 400 or kind != "text/event-stream":
                    failed += 1
                    continue
                answer = await _events(again, request_id, inbound, error, where)
        except Exception:
            failed += 1
    if answer is not None:
        return answer
    return error(types.CONNECTION_CLOSED, "SSE stream ended and reconnection attempts were "
                 "exhausted" if where.last_id is not None else
                 "SSE stream ended without a response")


async def _events(response: Any, request_id: str, inbound: Any,
                  error: Callable[[int, str], Any], where: _Events) -> Any:
    """The answer on one event stream, or None when it ended without it."""
    import httpx2
    import mcp_types as types
    from mcp.client.streamable_http import DEFAULT_MAX_SSE_EVENT_SIZE
    from mcp.shared.message import SessionMessage

    try:
        async for sse in httpx2.EventSource(response, max_event_size=DEFAULT_MAX_SSE_EVENT_SIZE):
            where.last_id = sse.id or where.last_id
            where.retry_ms = sse.retry if sse.retry is not None else where.retry_ms
            if sse.event != "message" or not sse.data:
                continue
            try:
                message = types.jsonrpc_message_adapter.validate_json(sse.data, by_name=False)
            except Exception as exc:
                return error(types.PARSE_ERROR, f"Failed to parse SSE message: {exc}")
            if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
                # a POST's own stream (or its resumption) answers that POST: the id is the
                # call's whatever it says, as the SDK's transport takes it; a JSON body is
                # checked against the call's id instead (``_ours``), as the SDK's session does
                return message.model_copy(update={"id": request_id})
            await inbound.send(SessionMessage(message))
    except httpx2.SSEError as exc:
        return error(types.CONNECTION_CLOSED, f"SSE stream failed: {exc}")
    except (httpx2.ReadError, httpx2.RemoteProtocolError):
        return None  # the stream broke off (an answer over the cap among others)
    return None


def _ours(message: Any, request_id: str, error: Callable[[int, str], Any]) -> Any:
    import mcp_types as types

    if isinstance(message, types.JSONRPCResponse | types.JSONRPCError) \
            and message.id == request_id:
        return message
    return error(types.CONNECTION_CLOSED, "the upstream's answer did not carry the call's result")


async def _cancelled(session: Any, request_id: str) -> None:
    """Tell the upstream a call it may have started is abandoned (the SDK's courtesy cancel)."""
    import mcp_types as types

    with contextlib.suppress(Exception):
        await session.send_notification(types.CancelledNotification(
            params=types.CancelledNotificationParams(request_id=request_id,
                                                     reason="caller cancelled")))


async def _result(session: Any, name: str, version: str, raw: dict[str, Any]
                  ) -> types.CallToolResult:
    """A call's result as the SDK's session makes it: checked against the negotiated
    revision, the result model, the output schema."""
    import mcp_types as types
    from mcp_types import methods

    with contextlib.suppress(KeyError):
        methods.validate_server_result("tools/call", version, raw)
    result = types.CallToolResult.model_validate(raw, by_name=False)
    if not result.is_error:
        await session.validate_tool_result(name, result)
    return result


@contextlib.asynccontextmanager
async def streamable_http(url: str, http: Any, linked: Callable[[LeanLink], None],
                          transport: Any = None, check: ToolListCheck | None = None
                          ) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's Streamable HTTP client transport over ``http``, what it reads passed on to
    the SDK's session through a stream the lean path hands messages to as well; the
    ``LeanLink`` handed to ``linked`` (``transport``: ``http``'s own, for plain calls).
    ``check`` sees what the SDK sends and checks the tool listings it reads."""
    from mcp.client.streamable_http import streamable_http_client

    inbound, merged = anyio.create_memory_object_stream[Any](0)
    async with streamable_http_client(url, http_client=http) as (read, write), merged, \
            anyio.create_task_group() as group:

        async def forward() -> None:
            async with inbound:
                with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                    async for item in read:
                        await inbound.send(item if check is None else check.received(item))

        group.start_soon(forward)
        linked(LeanLink(url, http, inbound, transport))
        try:
            yield merged, write if check is None else Watched(write, check)
        finally:
            group.cancel_scope.cancel()
