"""The commonest request in one pass: a plain ``tools/call``, on either wire.

The one-request path (``exchange.py``) hands each ``tools/call`` and ``tools/list`` to the
SDK's single-request kernel (``serve_one``), which checks the params twice (against the spec's
surface for the protocol version, then into the handler's params model), composes the server's
middleware around the handler and unwinds the request's connection. For the request most
clients send most — ``{"name": ..., "arguments": {...}}`` and nothing else: no ``_meta`` (no
progress token), no ``task``, no ``requestState`` — every middleware this server carries lets
it through untouched, and both checks accept exactly the same params (a string name, an object
of arguments). ``FastCall`` serves that request with the kernel's own parts in one pass: the
params validated once into the handler's model, the same registered handler (``MCPFace``'s,
which takes the call through the invoker's door: budget, approval, hooks, audit), the result
shaped for the wire by the kernel's serializer, the connection unwound as the kernel does
(when anything was pushed onto it: the kernel's shielded, bounded scope around an empty
unwind was 2.5 % of a call). The
answer is the same, byte for byte (a test holds the two paths to it).

On the 2026-07-28 wire a plain call also carries the envelope's ``_meta`` (protocol version,
client info and capabilities, which the SDK's entry has checked): there the server's
middleware is composed around the one pass as the kernel composes it — an answer asking for
input gets its ``requestState`` sealed by the middleware that seals it on the kernel's path —
and the result gets the kernel's ``resultType`` and ``serverInfo`` stamp.

Anything else — another method, other params, a server carrying middleware not known to let
such a request through (a tracer set up, a middleware of the embedding app's) — keeps the
kernel's path.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, cast

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.request_state import RequestStateBoundary
from mcp.server.runner import aclose_shielded, serve_one
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    CORE_RESULT_TYPES,
    INTERNAL_ERROR,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
    ErrorData,
    RequestParams,
    RequestParamsMeta,
)
from mcp_types.methods import serialize_server_result, validate_client_request
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError

from ..mcp.legacy_tasks import LegacyTasks
from .tracecontext import WhenTraced

__all__ = ["WATCH_AFTER_S", "FastCall", "LateWatch", "OneExchange"]

logger = logging.getLogger(__name__)

PLAIN_PARAMS = frozenset({"name", "arguments"})
"""The params of a plain call: what both of the kernel's checks accept alike, given a string
``name`` and an object of ``arguments``."""
ENVELOPE = frozenset({PROTOCOL_VERSION_META_KEY, CLIENT_INFO_META_KEY, CLIENT_CAPABILITIES_META_KEY})
"""The ``_meta`` keys of a plain 2026-07-28 call: the envelope every request of that wire
carries (which the SDK's entry has checked before the call comes here); any other key (a
progress token, a log level) keeps the kernel's path."""
METHOD = "tools/call"


@dataclass
class OneExchange:
    """The dispatch context of one request answered in one HTTP exchange (the SDK's
    ``DispatchContext`` protocol): no back-channel for server-to-client requests (a POST has
    nowhere for the reply to land, as on the SDK's stateless path); notifications go onto this
    request's answer (``answer.event``), shaped by ``message``."""

    transport: Any
    request_id: Any
    message_metadata: Any
    answer: Any
    progress_token: Any = None
    can_send_request: bool = False
    _cancel_requested: anyio.Event | None = None

    @property
    def cancel_requested(self) -> anyio.Event:
        """Never set (such a request has no cancel notification: the client hangs up
        instead); made when asked for."""
        if self._cancel_requested is None:
            self._cancel_requested = anyio.Event()
        return self._cancel_requested

    async def send_raw_request(self, method: str, params: Mapping[str, Any] | None,
                               opts: Any = None) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def notify(self, method: str, params: Mapping[str, Any] | None,
                     opts: Any = None) -> None:
        await self.answer.event(self.message(method, params))

    def message(self, method: str, params: Mapping[str, Any] | None) -> Any:
        """A notification as ``answer.event`` takes it: here the JSON-RPC message."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        return message

    async def progress(self, progress: float, total: float | None = None,
                       message: str | None = None) -> None:
        if self.progress_token is None:
            return
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.notify("notifications/progress", params)


def _passes_plain_call(middleware: object) -> bool:
    """Whether ``middleware`` lets a plain ``tools/call`` through untouched, both ways:
    ``requestState`` sealing acts only on a request carrying one and an answer asking for
    input (which a 2025 call never gets, and which a 2026 call gets sealed by running the
    middleware itself); 2025-11-25 tasks only on a call naming ``task``; the SDK's tracing
    only while a tracer provider is set up."""
    if isinstance(middleware, WhenTraced):
        return middleware.source.tracer() is None
    return isinstance(middleware, RequestStateBoundary | LegacyTasks)


def _plain_params(params: Mapping[str, Any], version: str) -> bool:
    """Whether ``params`` are a plain call's on the wire of ``version``: a name and arguments,
    and on the 2026-07-28 wire the envelope's ``_meta`` beside them."""
    if version in HANDSHAKE_PROTOCOL_VERSIONS:
        return params.keys() <= PLAIN_PARAMS
    if version not in MODERN_PROTOCOL_VERSIONS or not params.keys() <= PLAIN_PARAMS | {"_meta"}:
        return False
    meta = params.get("_meta", {})
    return isinstance(meta, dict) and meta.keys() <= ENVELOPE


class FastCall:
    """``serve_one``'s counterpart for plain ``tools/call`` requests of ``server`` (the same
    signature, less the server): ``takes`` says whether a request is one."""

    def __init__(self, server: Server[Any]) -> None:
        self.server = server

    def takes(self, method: str, params: Mapping[str, Any] | None, version: str) -> bool:
        """Whether this request is a plain call this server's middleware and cache hints let
        through."""
        if method != METHOD or params is None or not _plain_params(params, version):
            return False
        if not isinstance(params.get("name"), str):
            return False
        if not isinstance(params.get("arguments", {}), dict) or METHOD in self.server.cache_hints:
            return False
        return all(_passes_plain_call(m) for m in self.server.middleware)

    async def __call__(self, dctx: Any, method: str, params: Mapping[str, Any] | None, *,
                       connection: Any, lifespan_state: Any) -> dict[str, Any]:
        """The result of the request, as ``serve_one`` gives it (and raising what it
        raises); a request ``takes`` refuses goes to ``serve_one``."""
        version = connection.protocol_version
        entry = self.server.get_request_handler(method)
        if (entry is None or not connection.initialize_accepted  # the kernel's refusals
                or not self.takes(method, params, version)):
            return await serve_one(self.server, dctx, method, params, connection=connection,
                                   lifespan_state=lifespan_state)
        try:
            if version in MODERN_PROTOCOL_VERSIONS:
                ctx = _context(dctx, connection, method, params, lifespan_state, _meta(params))
                return await self._modern(ctx, entry)
            ctx = _context(dctx, connection, method, params, lifespan_state, None)
            # ``takes`` has checked what the model would: only a string name and an object
            # of arguments (a JSON object's keys are strings), so it is built, not validated
            typed = entry.params_type.model_construct(**(params or {}))
            return _sieved(method, version, _dumped(await entry.handler(ctx, typed)))
        finally:
            if connection.exit_stack._exit_callbacks:  # nothing to unwind: no cancel scope
                await aclose_shielded(connection)

    async def _modern(self, ctx: ServerRequestContext[Any, Any], entry: Any) -> dict[str, Any]:
        """A plain 2026-07-28 call as the kernel runs it, less the composing: the server's
        middleware around the spec's check, the handler, the result shaped for the wire (an
        answer asking for input gets its ``requestState`` sealed by the middleware that seals
        it on the kernel's path)."""
        version = ctx.protocol_version

        async def inner(ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
            validate_client_request(ctx.method, version, ctx.params)
            typed = entry.params_type.model_validate(ctx.params, by_name=False)
            dumped = _dumped(await entry.handler(ctx, typed))
            result_type = dumped.get("resultType")
            if not isinstance(result_type, str) or result_type in CORE_RESULT_TYPES:
                dumped = _sieved(ctx.method, version, dumped)
            if dumped.get("resultType") is None:  # required on this wire
                dumped["resultType"] = "complete"
            return self._stamped(dumped)

        call: CallNext = inner
        for middleware in reversed(self.server.middleware):
            call = _bound(middleware, call)
        return _dumped(await call(ctx))

    def _stamped(self, result: dict[str, Any]) -> dict[str, Any]:
        """``serverInfo`` in a 2026-era result's ``_meta``, as the kernel stamps it (a value
        the handler set wins; a ``_meta`` that is not an object is the handler's)."""
        meta = result.get("_meta")
        if meta is None:
            result["_meta"] = {SERVER_INFO_META_KEY: self.server.server_info_stamp}
        elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
            result["_meta"] = {**meta, SERVER_INFO_META_KEY: self.server.server_info_stamp}
        return result


def _bound(middleware: Any, call_next: CallNext) -> CallNext:
    """``middleware`` with the rest of the chain bound, taking the context at call time."""
    def call(ctx: ServerRequestContext[Any, Any]) -> Any:
        return middleware(ctx, call_next)
    return call


def _meta(params: Mapping[str, Any] | None) -> RequestParamsMeta | None:
    """The request's ``_meta`` as the kernel lifts it: ``None`` when absent or malformed."""
    if not params or "_meta" not in params:
        return None
    try:
        return RequestParams.model_validate(params, by_name=False).meta
    except ValidationError:
        return None


def _context(dctx: Any, connection: Any, method: str, params: Mapping[str, Any] | None,
             lifespan_state: Any, meta: RequestParamsMeta | None) -> ServerRequestContext[Any, Any]:
    """The handler's context, as the kernel makes it."""
    md = dctx.message_metadata
    request = md.request_context if isinstance(md, ServerMessageMetadata) else None
    return ServerRequestContext(
        session=ServerSession(dctx, connection, request_meta=meta), lifespan_context=lifespan_state,
        method=method, params=params, request_id=dctx.request_id, meta=meta,
        protocol_version=connection.protocol_version, request=request)


def _dumped(result: Any) -> dict[str, Any]:
    """A handler's result as a dict the caller owns, as the kernel dumps it (an error
    raised)."""
    if isinstance(result, ErrorData):
        raise MCPError.from_error_data(result)
    if result is None:
        return {}
    if isinstance(result, BaseModel):
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)
    if isinstance(result, dict):
        return dict(result)  # the caller owns it (a handler may keep the one it returned)
    raise TypeError(f"handler returned {type(result).__name__}; expected BaseModel or dict")


_PLAIN_RESULT_KEYS = frozenset({"content", "isError", "structuredContent", "resultType"})
_TEXT_BLOCK_KEYS = frozenset({"type", "text"})
_PLAIN_DEPTH = 64
"""Nesting a plain result's structured content may have; deeper goes to the surface's
check."""


def _plain_tree(value: object, depth: int) -> bool:
    """Whether ``value`` is JSON the surface's dump leaves as it is: strings, booleans,
    integers, finite floats, ``None``, lists and string-keyed objects of them (not a tuple, a
    float that is not a number, a key that is not a string, a subclass of any of them)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(cast(float, value))
    if depth <= 0:
        return False
    if kind is list:
        return all(_plain_tree(item, depth - 1) for item in cast(list[object], value))
    if kind is dict:
        return all(type(key) is str and _plain_tree(item, depth - 1)
                   for key, item in cast(dict[object, object], value).items())
    return False


def _plain_result(version: str, dumped: dict[str, Any]) -> dict[str, Any] | None:
    """``serialize_server_result``'s answer for the result a finished call commonly has —
    text blocks, ``isError``, plain structured content, ``resultType`` "complete" (which the
    2025 surface drops and the 2026 one keeps) — without its model's validation and dump
    (about 6 % of a served call's profile samples); ``None`` for any other result, which the
    surface checks.
    A test holds the two to the same answer over generated results."""
    if not dumped.keys() <= _PLAIN_RESULT_KEYS:
        return None
    modern = version in MODERN_PROTOCOL_VERSIONS
    if modern and dumped.get("resultType") != "complete":
        return None
    if not modern and version not in HANDSHAKE_PROTOCOL_VERSIONS:
        return None
    content = dumped.get("content")
    if type(content) is not list:
        return None
    blocks = []
    for block in content:
        if (type(block) is not dict or block.keys() != _TEXT_BLOCK_KEYS
                or block["type"] != "text" or type(block["text"]) is not str):
            return None
        blocks.append({"text": block["text"], "type": "text"})
    out: dict[str, Any] = {"content": blocks}
    if "isError" in dumped:
        is_error = dumped["isError"]
        if type(is_error) is not bool:
            return None
        out["isError"] = is_error
    if modern:
        out["resultType"] = "complete"
    structured = dumped.get("structuredContent")
    if structured is not None:
        if type(structured) is not dict or not _plain_tree(structured, _PLAIN_DEPTH):
            return None
        out["structuredContent"] = structured
    return out


def _sieved(method: str, version: str, dumped: dict[str, Any]) -> dict[str, Any]:
    """A result sieved by the version's surface, as the kernel sieves it (a finished call's
    plain result: ``_plain_result``)."""
    if method == METHOD:
        plain = _plain_result(version, dumped)
        if plain is not None:
            return plain
    try:
        return serialize_server_result(method, version, dumped)
    except ValidationError:  # a bug of the server's, logged, its detail not sent
        logger.exception("handler for %r returned an invalid result", method)
        raise MCPError(code=INTERNAL_ERROR, message="Handler returned an invalid result") from None


WATCH_AFTER_S = 0.05
"""Seconds a call runs before a task starts watching for its client hanging up."""


class LateWatch:
    """A call's watcher (for the client hanging up, and the keep-alive comments of a long
    answer) started only once the call has run ``WATCH_AFTER_S``: most calls have answered by
    then, and a task per request to learn of a hang-up nobody made was ~3 % of a served call's
    CPU. A client that hangs up sooner is noticed when the watcher starts (its first
    ``receive`` returns the disconnect at once), so its call is still cancelled and recorded so.
    """

    __slots__ = ("_start", "_task", "_timer")

    def __init__(self, start: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self._start = start
        self._task: asyncio.Future[None] | None = None
        self._timer = asyncio.get_running_loop().call_later(WATCH_AFTER_S, self._go)

    def _go(self) -> None:
        self._task = asyncio.ensure_future(self._start())

    def cancel(self) -> None:
        self._timer.cancel()
        if self._task is not None:
            self._task.cancel()
