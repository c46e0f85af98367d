"""The MCP wire as the face reads it, each thing named once: the request context (the SDK's
own type), which protocol era a request speaks, and the JSON-RPC error codes the face answers
with (the SDK's constants where it has them)."""

from __future__ import annotations

import base64
import os
import threading
from typing import Any, Protocol, TypeAlias

from mcp.server.context import ServerRequestContext
from mcp_types import (
    CONNECTION_CLOSED,
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
)
from mcp_types.version import KNOWN_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS, is_version_at_least

from ..gateway.sources import RESOURCE_NOT_FOUND

__all__ = ["CONNECTION_CLOSED", "HEADER_MISMATCH", "INTERNAL_ERROR", "INVALID_PARAMS", "INVALID_REQUEST",
           "METHOD_NOT_FOUND", "MISSING_CAPABILITY", "MODERN", "NO_WAY_BACK", "PARSE_ERROR",
           "RESOURCE_NOT_FOUND", "Ctx", "State", "call_id", "era_of", "modern", "not_found_code"]

State: TypeAlias = dict[str, Any]
"""What the face's lifespan yields (``MCPFace.state``)."""
Ctx: TypeAlias = ServerRequestContext[State, Any]
"""The context the SDK hands each request handler (its ``request``: the HTTP request, or
``None`` over stdio)."""

MISSING_CAPABILITY = MISSING_REQUIRED_CLIENT_CAPABILITY
"""A request that needs a capability the client did not declare (2026-07-28)."""
NO_WAY_BACK = INVALID_REQUEST
"""A request that needs to ask the client on a connection that cannot carry a request back to
it (the SDK's ``NoBackChannelError`` answers the same)."""
MODERN = MODERN_PROTOCOL_VERSIONS[0]
"""The first revision of the per-request era (``subscriptions/listen``, input rounds)."""
_PER_REQUEST = frozenset(v for v in KNOWN_PROTOCOL_VERSIONS if is_version_at_least(v, MODERN))
"""The known revisions at least as new as ``MODERN``: what ``is_version_at_least`` answers
yes for, asked once (a served call asks it several times)."""


class Versioned(Protocol):
    @property
    def protocol_version(self) -> str: ...


def modern(request: Versioned) -> bool:
    """Whether ``request`` speaks the per-request era (2026-07-28 and later): its client
    listens with ``subscriptions/listen`` and answers questions in rounds (``inputRequests``)
    instead of on an open connection. An unknown revision is taken for the handshake era."""
    return request.protocol_version in _PER_REQUEST


def era_of(request: Versioned) -> str:
    """The era ``request`` speaks, as a policy reads it (``context.era``): ``per-request``
    (2026-07-28 and later) or ``handshake``."""
    return "per-request" if modern(request) else "handshake"


def not_found_code(request: Versioned) -> int:
    """The code answering a read of a resource that is not there, as the revision ``request``
    speaks says: invalid params in the per-request era, ``RESOURCE_NOT_FOUND`` before."""
    return INVALID_PARAMS if modern(request) else RESOURCE_NOT_FOUND


class _CallIds:
    """Unguessable call ids without a system call per call: 9 random bytes each (as
    ``secrets.token_urlsafe(9)`` gives), cut from 4 KiB read from the OS's CSPRNG at a time.
    ``os.urandom`` lets go of the GIL, and on the event loop each call that did so handed the
    GIL to the audit writer thread: a syscall per ``tools/call`` cost ~10 % of serve's capacity
    under load (``docs/benchmarks.md``)."""

    SIZE = 9
    POOL = SIZE * 455

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool, self._at = b"", self.POOL
        os.register_at_fork(after_in_child=self._forget)  # a child never repeats its parent's

    def _forget(self) -> None:
        self._lock = threading.Lock()
        self._pool, self._at = b"", self.POOL

    def __call__(self) -> str:
        with self._lock:
            if self._at >= self.POOL:
                self._pool, self._at = os.urandom(self.POOL), 0
            chunk = self._pool[self._at:self._at + self.SIZE]
            self._at += self.SIZE
        return "mcp_" + base64.urlsafe_b64encode(chunk).decode("ascii")


call_id = _CallIds()
"""A fresh id for a call the face reads off the wire (``mcp_`` and 12 URL-safe characters)."""
