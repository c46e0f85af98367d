"""The commonest request in one pass: a plain ``tools/call`` on the handshake-era (2025) wire.

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

Anything else — another method, other params, a server carrying middleware not known to let
such a request through (a tracer set up, a middleware of the embedding app's) — keeps the
kernel's path.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.request_state import RequestStateBoundary
from mcp.server.runner import aclose_shielded, serve_one
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import INTERNAL_ERROR, ErrorData
from mcp_types.methods import serialize_server_result
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError

from ..mcp.legacy_tasks import LegacyTasks
from .tracecontext import WhenTraced

__all__ = ["FastCall"]

logger = logging.getLogger(__name__)

PLAIN_PARAMS = frozenset({"name", "arguments"})
"""The params of a plain call: what both of the kernel's checks accept alike, given a string
``name`` and an object of ``arguments``."""
METHOD = "tools/call"


def _passes_plain_call(middleware: object) -> bool:
    """Whether ``middleware`` lets a plain ``tools/call`` through untouched, both ways:
    ``requestState`` sealing acts only on a request carrying one and an answer asking for
    input (which a 2025 call never gets); 2025-11-25 tasks only on a call naming ``task``;
    the SDK's tracing only while a tracer provider is set up."""
    if isinstance(middleware, WhenTraced):
        return middleware.source.tracer() is None
    return isinstance(middleware, RequestStateBoundary | LegacyTasks)


class FastCall:
    """``serve_one``'s counterpart for plain ``tools/call`` requests of ``server`` (the same
    signature, less the server): ``takes`` says whether a request is one."""

    def __init__(self, server: Server[Any]) -> None:
        self.server = server

    def takes(self, method: str, params: Mapping[str, Any] | None, version: str) -> bool:
        """Whether this request is a plain 2025-era call this server's middleware and cache
        hints let through."""
        if method != METHOD or params is None or not params.keys() <= PLAIN_PARAMS:
            return False
        if not isinstance(params.get("name"), str):
            return False
        if not isinstance(params.get("arguments", {}), dict):
            return False
        if version not in HANDSHAKE_PROTOCOL_VERSIONS or METHOD in self.server.cache_hints:
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
            ctx = _context(dctx, connection, method, params, lifespan_state)
            typed = entry.params_type.model_validate(params, by_name=False)
            return _wire(method, version, await entry.handler(ctx, typed))
        finally:
            if connection.exit_stack._exit_callbacks:  # nothing to unwind: no cancel scope
                await aclose_shielded(connection)


def _context(dctx: Any, connection: Any, method: str, params: Mapping[str, Any] | None,
             lifespan_state: Any) -> ServerRequestContext[Any, Any]:
    """The handler's context, as the kernel makes it for a request without ``_meta``."""
    md = dctx.message_metadata
    request = md.request_context if isinstance(md, ServerMessageMetadata) else None
    return ServerRequestContext(
        session=ServerSession(dctx, connection, request_meta=None), lifespan_context=lifespan_state,
        method=method, params=params, request_id=dctx.request_id, meta=None,
        protocol_version=connection.protocol_version, request=request)


def _wire(method: str, version: str, result: Any) -> dict[str, Any]:
    """A handler's result shaped for a 2025-era wire, as the kernel shapes it: an error
    raised, a model dumped, then sieved by the version's surface."""
    if isinstance(result, ErrorData):
        raise MCPError.from_error_data(result)
    if result is None:
        dumped: dict[str, Any] = {}
    elif isinstance(result, BaseModel):
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    elif isinstance(result, dict):
        dumped = dict(result)  # the caller owns it (a handler may keep the one it returned)
    else:
        raise TypeError(f"handler returned {type(result).__name__}; expected BaseModel or dict")
    try:
        return serialize_server_result(method, version, dumped)
    except ValidationError:  # a bug of the server's, logged, its detail not sent
        logger.exception("handler for %r returned an invalid result", method)
        raise MCPError(code=INTERNAL_ERROR, message="Handler returned an invalid result") from None
