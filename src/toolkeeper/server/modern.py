"""A plain ``tools/call`` on the 2026-07-28 wire, answered in the request's own task.

On that wire each request is one POST carrying its own envelope; the SDK's entry for it checks
the request (Accept, the routing headers, the envelope, the ``Mcp-Param-*`` headers), then — in
event-stream mode, which ``toolkeeper serve`` runs — starts a task group, a memory stream and
a disconnect watcher for every call, and runs the kernel (``serve_one``) in a sibling task. For
a plain call (a name, arguments and the envelope's ``_meta``; no progress token, no
``requestState``) this path runs the same checks with the SDK's own functions, serves the call
through ``FastCall`` in the request's task, and answers as the SDK's entry answers: one JSON
body (the error's HTTP status from the SDK's table) unless the handler sends a notification or
stays silent for the keep-alive interval — then an event stream, with the SDK's headers and
frames. A client that hangs up cancels the call, as on the SDK's path.

A request any check refuses, and every other request, is left to the SDK's entry (``None`` from
``ModernCall.request``), which answers it with its own refusal.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from mcp.server.connection import Connection
from mcp.server.runner import modern_error_data
from mcp.server.streamable_http import check_accept_headers
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_PARAM_HEADER_PREFIX,
    InboundModernRoute,
    classify_inbound_request,
    find_duplicated_routing_header,
    validate_mcp_param_headers,
)
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from .fastpath import METHOD, FastCall, LateWatch, OneExchange

__all__ = ["ModernCall"]

PING_S = 15.0
"""Seconds of silence before the answer becomes an event stream, and then between keep-alive
comments: the SDK entry's interval."""
_SSE_HEADERS = [(b"content-type", b"text/event-stream"),
                (b"cache-control", b"no-cache, no-transform"), (b"connection", b"keep-alive"),
                (b"x-accel-buffering", b"no")]
_PARAM_PREFIX = MCP_PARAM_HEADER_PREFIX.lower()


def _frame(message: JSONRPCResponse | JSONRPCError | JSONRPCNotification) -> bytes:
    """One event-stream frame, as the SDK's entry writes it."""
    data = json.dumps(message.model_dump(mode="json", by_alias=True, exclude_none=True),
                      separators=(",", ":"))
    return f"event: message\r\ndata: {data}\r\n\r\n".encode()


class _Answer:
    """The HTTP answer of one call: one JSON body, or an event stream from the first
    notification (or the first keep-alive) on."""

    def __init__(self, scope: Any, receive: Any, send: Any) -> None:
        self.scope, self.receive, self.send = scope, receive, send
        self.streaming = False
        self.closed = False

    async def event(self, frame: bytes) -> None:
        if self.closed:
            return
        if not self.streaming:
            self.streaming = True
            await self.send({"type": "http.response.start", "status": 200,
                             "headers": _SSE_HEADERS})
        await self.send({"type": "http.response.body", "body": frame, "more_body": True})

    async def finish(self, message: JSONRPCResponse | JSONRPCError) -> None:
        if self.closed:
            return
        self.closed = True
        if self.streaming:
            await self.send({"type": "http.response.body", "body": _frame(message),
                             "more_body": False})
            return
        status = ERROR_CODE_HTTP_STATUS.get(message.error.code, 200) if isinstance(
            message, JSONRPCError) else 200
        body = json.dumps(message.model_dump(mode="json", by_alias=True, exclude_none=True),
                          separators=(",", ":"))
        await Response(body, status_code=status, media_type="application/json")(
            self.scope, self.receive, self.send)


class _Exchange(OneExchange):
    """``OneExchange`` on the 2026-07-28 wire (it has no back-channel at all): a notification
    goes onto this call's answer as the SDK frames it; a plain call names no progress token."""

    def message(self, method: str, params: Mapping[str, Any] | None) -> Any:
        body = dict(params) if params is not None else None
        return _frame(JSONRPCNotification(jsonrpc="2.0", method=method, params=body))


class ModernCall:
    """Plain 2026-07-28 ``tools/call`` requests of ``fast``'s server, in one pass."""

    def __init__(self, fast: FastCall, state: Mapping[str, Any]) -> None:
        self.fast = fast
        self.state = state

    def request(self, decoded: object, http: Request) -> tuple[JSONRPCRequest,
                                                               InboundModernRoute] | None:
        """The request and its route when this path serves it: a plain call every check of
        the SDK's entry lets through. ``None`` leaves it to the SDK's entry."""
        if not isinstance(decoded, dict) or decoded.get("method") != METHOD or "id" not in decoded:
            return None
        if check_accept_headers(http) != (True, True):
            return None
        try:
            request = JSONRPCRequest.model_validate(decoded)
        except ValidationError:
            return None
        if find_duplicated_routing_header(http.headers.items()) is not None:
            return None
        route = classify_inbound_request(decoded, headers=dict(http.headers))
        if not isinstance(route, InboundModernRoute) or not self.fast.takes(
                METHOD, request.params, route.protocol_version):
            return None
        return (request, route) if self._params_fit_headers(request, http) else None

    def _params_fit_headers(self, request: JSONRPCRequest, http: Request) -> bool:
        """Whether the ``Mcp-Param-*`` headers agree with the arguments, as the SDK's entry
        checks them against the tool's input schema (a lookup that fails skips the check
        there, so it leaves the request to the SDK here)."""
        lookup = self.fast.server.get_tool_input_schema
        params = request.params or {}
        arguments = params.get("arguments") or {}
        if not arguments and not any(h.startswith(_PARAM_PREFIX) for h in http.headers):
            return True
        if lookup is None:
            return False
        try:
            schema = lookup(params["name"])
        except Exception:
            return False
        return schema is None or validate_mcp_param_headers(schema, arguments, http.headers) is None

    async def serve(self, request: JSONRPCRequest, route: InboundModernRoute, http: Request,
                    scope: Any, receive: Any, send: Any) -> None:
        answer = _Answer(scope, receive, send)
        dctx = _Exchange(
            transport=TransportContext(kind="streamable-http", can_send_request=False,
                                       headers=http.headers),
            request_id=request.id, message_metadata=ServerMessageMetadata(request_context=http),
            answer=answer)
        connection = Connection.from_envelope(route.protocol_version, route.client_info,
                                              route.client_capabilities)
        task = asyncio.current_task()
        assert task is not None
        hung_up: list[bool] = []
        watcher = LateWatch(lambda: _watch(receive, answer, task, hung_up))
        try:
            try:
                result = await self.fast(dctx, METHOD, request.params, connection=connection,
                                         lifespan_state=self.state)
                reply: JSONRPCResponse | JSONRPCError = JSONRPCResponse(
                    jsonrpc="2.0", id=request.id, result=result)
            except Exception as exc:  # the wire's error, as the SDK's entry maps it
                reply = JSONRPCError(jsonrpc="2.0", id=request.id, error=modern_error_data(exc))
            await answer.finish(reply)
        except asyncio.CancelledError:
            if not hung_up:
                raise
            task.uncancel()  # the client hung up and the call was cancelled: nothing to send
        finally:
            watcher.cancel()


async def _watch(receive: Any, answer: _Answer, task: asyncio.Task[Any],
                 hung_up: list[bool]) -> None:
    """Keep-alive comments while the call is silent (the first one makes the answer an event
    stream, as the SDK's entry does), and the call cancelled when the client hangs up."""
    while True:
        try:
            async with asyncio.timeout(PING_S):
                message = await receive()
        except TimeoutError:
            await answer.event(b": ping\r\n\r\n")
            continue
        if message["type"] == "http.disconnect":
            if not answer.closed:  # not once the answer is (being) sent
                answer.closed = True
                hung_up.append(True)
                task.cancel()
            return
