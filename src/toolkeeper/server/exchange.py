"""One request, one answer: a lean stateless path for ``tools/call`` and ``tools/list`` on the
handshake-era (2025) wire, in front of the SDK's Streamable HTTP app.

In stateless mode the SDK serves each 2025-era POST by building a whole transport for it (a
task group, memory streams, a JSON-RPC dispatcher, a server loop) and answers as an event
stream; under load that machinery, not the tool, was most of a call (``docs/benchmarks.md``).
A stateless request needs none of it: this path reads the one JSON-RPC request and runs it
through the SDK's own single-request kernel (``serve_one``: the server's middleware, the
method's params validation, the registered handler, the result sieved for the wire), as the
SDK's 2026-07-28 entry does — a plain ``tools/call`` (a name and arguments, nothing else) in
one pass with the kernel's own parts (``fastpath.py``). The answer is one JSON body unless the
handler sends something before it ends (progress, a log line): then the response becomes an
event stream carrying those notifications and then the result — what the SDK's event-stream
answer carries.

Before that, every POST the SDK would not refuse (Accept, Content-Type, Host, Origin, size)
has its JSON-RPC envelope checked here, whatever its method or wire: a body that is not JSON is
answered -32700 and one that is not a request, a notification or a response -32600 (Invalid
Request), in one short message with ``id`` null unless the id is a valid one — where the SDK
answered -32602 with a validation dump, and took a request with an invalid id for a
notification.

A plain 2026-07-28 ``tools/call`` (a name, arguments and the envelope) is answered by
``modern.py`` as the SDK's own single-exchange entry answers it, in the request's task.

Everything else — another method, a batch, a notification, any other 2026-07-28 request (the
SDK's own single-exchange entry), a request the SDK refuses, any request on an event loop other
than asyncio — goes to the SDK app unchanged, with the body replayed when it was read.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

import orjson
from mcp.server.connection import Connection
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data, progress_token_from_params
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import DEFAULT_NEGOTIATED_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request

from ..mcp.exported import Exported
from ..mcp.server import stopped_text
from ..mcp.wire import HEADER_MISMATCH, INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR
from ..toolbox.catalog import CatalogBase
from .fastpath import FastCall, LateWatch, OneExchange
from .modern import ModernCall

__all__ = ["SingleExchange", "input_schemas", "task_name_mismatch"]

logger = logging.getLogger(__name__)

Message = MutableMapping[str, Any]
TASK_METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
"""The methods about one task, which the ``Mcp-Name`` header names on the 2026-07-28 wire."""
METHODS = frozenset({"tools/call", "tools/list"})
"""The methods answered here: the hot path. Every other method keeps the SDK's path."""
_PING_S = 15.0
"""Seconds between keep-alive comments once an answer has become an event stream."""
_SSE_HEADERS = [(b"content-type", b"text/event-stream"),
                (b"cache-control", b"no-cache, no-transform"), (b"connection", b"keep-alive")]


class _Answer:
    """The HTTP answer of one request: one JSON body, or an event stream once a notification
    comes before the result."""

    def __init__(self, send: Any) -> None:
        self.send = send
        self.streaming = False
        self.closed = False

    async def event(self, message: dict[str, Any]) -> None:
        if self.closed:
            return
        if not self.streaming:
            self.streaming = True
            await self.send({"type": "http.response.start", "status": 200,
                             "headers": _SSE_HEADERS})
        await self.send({"type": "http.response.body", "body": _sse(message), "more_body": True})

    async def ping(self) -> None:
        if self.streaming and not self.closed:
            await self.send({"type": "http.response.body", "body": b": ping\r\n\r\n",
                             "more_body": True})

    async def finish(self, message: dict[str, Any], status: int = 200) -> None:
        if self.closed:
            return
        self.closed = True
        if self.streaming:
            await self.send({"type": "http.response.body", "body": _sse(message),
                             "more_body": False})
            return
        body = _dumps(message)
        await self.send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode())]})
        await self.send({"type": "http.response.body", "body": body})


def _dumps(message: dict[str, Any]) -> bytes:
    """An answer's JSON (compact, UTF-8), by orjson: what ``json.dumps`` would write, a
    tenth of its time. A float is written in its shortest form (``0.00001`` for ``1e-05``) and
    one that is not a number (NaN, infinities) as ``null``, as the SDK's own answers write it
    (``json.dumps`` wrote ``NaN``, which is not JSON). What orjson does not write (an integer
    past 64 bits, a key that is not a string, nesting past 254 levels, a lone surrogate) is
    written by ``json.dumps`` (a lone surrogate as its ``\\udXXX`` escape: UTF-8 has none)."""
    try:
        return orjson.dumps(message)
    except TypeError:  # orjson.JSONEncodeError is one
        text = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode()
    except UnicodeEncodeError:  # a lone surrogate (a client's own \udXXX, echoed): escaped
        return json.dumps(message, separators=(",", ":")).encode()


def _sse(message: dict[str, Any]) -> bytes:
    return b"event: message\r\ndata: " + _dumps(message) + b"\r\n\r\n"


class SingleExchange:
    """ASGI app: ``tools/call`` and ``tools/list`` POSTed to ``path`` on a 2025-era (or
    unnamed) protocol version, answered through the SDK's ``serve_one``; everything else
    passed to ``app`` (the SDK's Streamable HTTP app, stateless)."""

    def __init__(self, app: Any, server: Any, *, security: Any, max_body_bytes: int,
                 path: str = "/mcp", stopping: threading.Event | None = None,
                 state: Mapping[str, Any] | None = None) -> None:
        self.app = app
        self.server = server
        self.serve_one = FastCall(server)
        """The SDK's kernel, a plain call served in one pass (``fastpath.py``)."""
        self.path = path
        self.security = TransportSecurityMiddleware(security)
        self.max_body_bytes = max_body_bytes
        self.versions = frozenset(HANDSHAKE_PROTOCOL_VERSIONS)
        self.stopping = stopping
        """Set when the server stops: a call cancelled then is answered, not dropped."""
        self.state = state if state is not None else {}
        """What the server's lifespan yields (``MCPFace.state``): its handlers read it as
        ``ctx.lifespan_context`` here as on the SDK's own path."""
        self.modern = ModernCall(self.serve_one, self.state)
        """A plain 2026-07-28 call, answered as the SDK's entry answers it (``modern.py``)."""
        self._no_channel = Connection.from_envelope(DEFAULT_NEGOTIATED_VERSION, None, None).outbound
        """The SDK's outbound of a connection with no channel back (its private sentinel)."""

    def _secure(self, headers: list[tuple[bytes, bytes]]) -> bool:
        """Whether a POST passes the SDK's transport checks (``TransportSecurityMiddleware``:
        a JSON ``Content-Type``; with DNS-rebinding protection on, an allowed ``Host`` and no
        foreign ``Origin``, each an exact value or a ``name:*`` pattern of its settings), read
        off the raw headers (the first of each name, as Starlette reads them) without a
        ``Headers`` or a ``Response`` per request; a request refused goes to the SDK's app,
        which refuses it (a test holds the two to the same answer on every header mix)."""
        content_type = _first(headers, b"content-type")
        if content_type is None or not content_type.lower().startswith("application/json"):
            return False
        settings = self.security.settings
        if not settings.enable_dns_rebinding_protection:
            return True
        host = _first(headers, b"host")
        if not host or not _allowed(host, settings.allowed_hosts):
            return False
        origin = _first(headers, b"origin")
        return not origin or _allowed(origin, settings.allowed_origins)

    def _connection(self, version: str) -> Connection:
        """The connection of a 2025-era request, as ``Connection.from_envelope(version,
        None, None)`` makes it (born ready, no client info or capabilities, no channel back)
        without validating the two absent values into models only to catch their errors."""
        connection = Connection(self._no_channel, protocol_version=version)
        connection.initialized.set()
        return connection

    async def __call__(self, scope: Message, receive: Any, send: Any) -> None:
        if (scope["type"] != "http" or scope["method"] != "POST"
                or scope["path"] != self.path or not _on_asyncio()):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", ()))
        version = headers.get(b"mcp-protocol-version")
        accept = headers.get(b"accept", b"")
        if (b"application/json" not in accept or b"text/event-stream" not in accept
                or int(headers.get(b"content-length", b"0") or b"0") > self.max_body_bytes):
            await self.app(scope, receive, send)  # the SDK refuses it (406, 413)
            return
        body, more = await _read(receive, self.max_body_bytes)
        if more:
            await self.app(scope, _replay(body, more, receive), send)
            return
        http = Request(scope, _replay(body, False, receive))
        if not self._secure(scope["headers"]):
            await self.app(scope, _replay(body, False, receive), send)  # 415, 421, 403
            return
        # Every method's envelope is checked here, once, as JSON-RPC 2.0 says.
        decoded, refusal = envelope(body)
        if refusal is None and version is not None and version.decode("latin-1") not in \
                self.versions:
            refusal = task_name_mismatch(decoded, headers.get(b"mcp-name"))
        if refusal is not None:
            await _Answer(send).finish(refusal, status=400)
            return
        if version is not None and version.decode("latin-1") not in self.versions:
            taken = self.modern.request(decoded, http)  # a plain 2026-07-28 call
            if taken is not None:
                await self.modern.serve(*taken, http, scope, receive, send)
                return
        request = _single_request(decoded) if (
            (version is None or version.decode("latin-1") in self.versions)
            and b"mcp-session-id" not in headers) else None
        if request is None:
            await self.app(scope, _replay(body, False, receive), send)
            return
        await self._serve(request, http, version.decode("latin-1") if version else None,
                          receive, send)

    async def _serve(self, request: dict[str, Any], http: Any, version: str | None,
                     receive: Any, send: Any) -> None:
        answer = _Answer(send)
        params = request.get("params")
        dctx = OneExchange(
            transport=TransportContext(kind="streamable-http", can_send_request=False),
            request_id=request["id"], answer=answer,
            message_metadata=ServerMessageMetadata(request_context=http),
            progress_token=progress_token_from_params(params))
        connection = self._connection(version or DEFAULT_NEGOTIATED_VERSION)
        lifespan_state = self.state

        async def run() -> None:
            try:
                result = await self.serve_one(dctx, request["method"], params,
                                              connection=connection, lifespan_state=lifespan_state)
                reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"], "result": result}
            except Exception as exc:  # the wire's error, as the SDK's dispatcher maps it
                error = handler_exception_to_error_data(exc)
                if error is None:
                    logger.exception("handler for %r raised", request["method"])
                    reply = {"jsonrpc": "2.0", "id": request["id"],
                             "error": {"code": 0, "message": str(exc)}}
                else:
                    reply = {"jsonrpc": "2.0", "id": request["id"],
                             "error": error.model_dump(mode="json", by_alias=True,
                                                       exclude_none=True)}
            await answer.finish(reply)

        async def watch(hang_up: Any) -> None:
            # The client hung up: the call is cancelled (recorded as cancelled), as on the
            # SDK's path. While an event stream is open, a comment now and then keeps proxies
            # from closing it.
            while True:
                try:
                    async with asyncio.timeout(_PING_S):
                        message = await receive()
                except TimeoutError:
                    await answer.ping()
                    continue
                if message["type"] == "http.disconnect":
                    if not answer.closed:  # not once the answer is (being) sent
                        answer.closed = True
                        hung_up.append(True)
                        hang_up()
                    return

        # The call runs in this request's task (a task group per request cost more than the
        # rest of this path); one plain task watches for the client hanging up, once the call
        # has run a moment (``LateWatch``).
        task = asyncio.current_task()
        assert task is not None
        hung_up: list[bool] = []
        watcher = LateWatch(lambda: watch(task.cancel))
        try:
            await run()
        except asyncio.CancelledError:
            if hung_up:  # the client hung up and the call was cancelled: nothing to send
                task.uncancel()
            elif self.stopping is not None and self.stopping.is_set():
                task.uncancel()  # the server stopped it: the client hears why
                await answer.finish(_stopped(request))
            else:
                raise
        finally:
            watcher.cancel()


def _stopped(request: dict[str, Any]) -> dict[str, Any]:
    """The answer to a request the server cancelled as it stopped (its calls in flight had a
    moment to finish): for a tool call, an error result the model reads."""
    params = request.get("params") or {}
    if request["method"] != "tools/call":
        return _refusal(INTERNAL_ERROR, "the server stopped before answering; send the request again",
                        request["id"])
    text = stopped_text(str(params.get("name")))
    return {"jsonrpc": "2.0", "id": request["id"],
            "result": {"content": [{"type": "text", "text": text}], "isError": True}}


def input_schemas(catalog: CatalogBase) -> Callable[[str], Mapping[str, Any] | None]:
    """A tool's input schema by its wire name (``Exported.input_schema``, which an
    ``MCPFace`` hands its server). Goes away in 0.3.0: use ``Exported(catalog).input_schema``."""
    return Exported(catalog).input_schema


def _on_asyncio() -> bool:
    """Whether this runs on asyncio (uvicorn); on another loop the SDK's path serves all."""
    try:
        return asyncio.current_task() is not None
    except RuntimeError:
        return False


async def _read(receive: Any, limit: int) -> tuple[bytes, bool]:
    """The request body, up to ``limit`` bytes: (what was read, whether more is left)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), False
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), False
        if size > limit:
            return b"".join(chunks), True


def _first(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    """The first value of header ``name`` (ASGI names are lower case), as Starlette reads it."""
    for key, value in headers:
        if key == name:
            return value.decode("latin-1")
    return None


def _allowed(value: str, allowed: list[str]) -> bool:
    """Whether ``value`` is one of ``allowed`` or has a port under one of its ``name:*``
    patterns, as the SDK's transport check matches a Host or an Origin."""
    return value in allowed or any(
        pattern.endswith(":*") and value.startswith(pattern[:-1]) for pattern in allowed)


def _replay(body: bytes, more: bool, receive: Any) -> Any:
    """A ``receive`` that hands out ``body`` first (as one message), then the rest."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": more}
        return dict(await receive())
    return replay


def task_name_mismatch(decoded: object, header: bytes | None) -> dict[str, Any] | None:
    """On the 2026-07-28 wire a request about a task names it in the ``Mcp-Name`` header too
    (for routers in front of replicas): one whose header is missing or names another task is
    refused (-32020, header mismatch), as the SDK refuses a ``tools/call`` whose header names
    another tool."""
    if not isinstance(decoded, dict) or decoded.get("method") not in TASK_METHODS:
        return None
    params = decoded.get("params")
    task_id = params.get("taskId") if isinstance(params, dict) else None
    named = header.decode("latin-1").strip() if header is not None else None
    if named == task_id:
        return None
    ident = decoded.get("id") if _valid_id(decoded.get("id")) else None
    return _refusal(HEADER_MISMATCH, f"the Mcp-Name header ({named!r}) must name the task "
                    f"params.taskId names ({task_id!r})", ident)


def _refusal(code: int, message: str, ident: object = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}


def _valid_id(ident: object) -> bool:
    """An id as MCP has it: a string or a whole number (never null, a bool, a fraction)."""
    return isinstance(ident, str) or (isinstance(ident, int) and not isinstance(ident, bool))


def _message_problem(message: object) -> str | None:
    """What makes ``message`` no JSON-RPC 2.0 request, notification or response, or ``None``."""
    if not isinstance(message, dict):
        return "a JSON-RPC message is an object"
    if message.get("jsonrpc") != "2.0":
        return 'the "jsonrpc" member must be exactly "2.0"'
    if "id" in message and not _valid_id(message["id"]):
        return '"id" must be a string or an integer'
    if "method" not in message:
        if "id" in message and ("result" in message) != ("error" in message):
            return None  # a response (to a request the server made)
        return 'a request needs a "method" (a response, a "result" or an "error")'
    if not isinstance(message["method"], str):
        return '"method" must be a string'
    params = message.get("params")
    if params is not None and not isinstance(params, dict):
        return '"params" must be an object (MCP names every parameter)'
    return None


def _loads(body: bytes) -> object:
    """The body's JSON, by orjson; a body orjson refuses (not UTF-8, a byte order mark,
    ``NaN``, an integer past 64 bits, nesting past 1,024 levels, or no JSON at all) is read
    by ``json.loads``, so what is accepted and how it reads are ``json.loads``'s."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)


def envelope(body: bytes) -> tuple[object, dict[str, Any] | None]:
    """The body decoded, and the JSON-RPC error that answers it when its envelope is not a
    request, a notification or a response (a batch is refused: MCP has none): -32700 for a
    body that is not JSON, -32600 otherwise, one short message, the id echoed only when it is
    a valid one."""
    try:
        decoded = _loads(body)
    except (ValueError, RecursionError):
        return None, _refusal(PARSE_ERROR, "Parse error: the body is not JSON")
    if isinstance(decoded, list):  # MCP has had no batches since 2025-06-18
        return decoded, _refusal(INVALID_REQUEST, "Invalid Request: a batch (a JSON array); "
                                 "send one JSON-RPC message per request")
    problem = _message_problem(decoded)
    if problem is not None:
        ident = decoded.get("id") if isinstance(decoded, dict) else None
        return decoded, _refusal(INVALID_REQUEST, f"Invalid Request: {problem}",
                                 ident if _valid_id(ident) else None)
    return decoded, None


def _single_request(decoded: object) -> dict[str, Any] | None:
    """The decoded body as one JSON-RPC request this path answers, else ``None``."""
    if (not isinstance(decoded, dict) or decoded.get("jsonrpc") != "2.0"
            or decoded.get("method") not in METHODS):
        return None
    ident = decoded.get("id")
    if isinstance(ident, bool) or not isinstance(ident, str | int):
        return None
    params = decoded.get("params")
    if params is not None and not isinstance(params, dict):
        return None
    return decoded
