"""MCP sessions over Streamable HTTP (2025-11-25, ``--sessions``) that any worker or replica
on one store can carry on, with no sticky load balancing.

The SDK's session manager keeps each session in the memory of the process that opened it; a
client's next request reaching another process is answered 404 "Session not found". Here the
session id is the session: what the ``initialize`` request declared (the client's protocol
version, capabilities and name) and which client opened it, sealed (AES-256-GCM) under a key
every server on the store shares (``toolkeeper_settings``). A process that meets an id it does
not hold opens it and serves the session from that request on, as the one that opened it
would: no store round trip per new session or per request, nothing to sweep.

A sealed id proves that this store's servers opened the session for that client: one presented
with another client's credential, tampered with or sealed under another key is "Session not
found", as an unknown id is. What a session learns after its handshake is not in its id; what
toolkeeper keeps per client (log level, loaded tools) is per client, not per session. Requests
of the 2026-07-28 wire carry no session and go to the SDK's own stateless manager.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import time
from collections.abc import AsyncIterator, MutableMapping
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, cast

import anyio
from anyio.abc import TaskGroup, TaskStatus
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from mcp.server.connection import Connection
from mcp.server.runner import serve_connection
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import RequestBodyLimitMiddleware, TransportSecuritySettings
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types import InitializeRequestParams
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

from ..core.context import CALLER_KEY, Caller
from .server import FaceServer
from .session_answers import (
    AnswerRelay,
    NumberedDispatcher,
    RequestIds,
    WatchedWrites,
    cancelled_id,
    is_answer,
    request_id,
)
from .session_store import SessionStore, beating, digest
from .streams import SessionEvents, StoredEvents
from .wire import INTERNAL_ERROR, INVALID_REQUEST

__all__ = ["SealedSessions", "SessionSeal"]

logger = logging.getLogger(__name__)

PREFIX = "tks1."
IDLE_S = 30 * 60.0
"""A session no request has used for this long is dropped from a process's memory (its id
still opens it anew, on this process or another)."""
MAX_SESSIONS = 10_000
"""Sessions one process holds at once; one more is refused with 503 until one ends."""
ENDS_POLL_S = 0.5
"""How often a process holding sessions looks for those ended through another."""
SEALED_PARAMS_BYTES = 4096
"""What of a handshake's params a session id seals, at most (as JSON): the id, a header,
stays under the 8 KiB that clients and proxies take."""
MAX_AGE_S = 24 * 3600.0
"""A session lasts at most this long after its handshake: then its id is not found, and the
client opens a new session (as the protocol has it do after a 404)."""

Scope = dict[str, Any]


class SessionSeal:
    """Seals and opens session ids under ``secret`` (the store's shared key; a key of its own is
    derived, so a session id and a ``requestState`` can never be taken for one another)."""

    def __init__(self, secret: str) -> None:
        key = hashlib.sha256(b"toolkeeper session id\0" + secret.encode()).digest()
        self.aead = AESGCM(key)

    def seal(self, state: dict[str, Any]) -> str:
        nonce = os.urandom(12)
        body = json.dumps(state, separators=(",", ":")).encode()
        sealed = self.aead.encrypt(nonce, body, PREFIX.encode())
        return PREFIX + base64.urlsafe_b64encode(nonce + sealed).rstrip(b"=").decode()

    def open(self, session_id: str) -> dict[str, Any] | None:
        """The state sealed in ``session_id``; ``None`` when it is not one of ours."""
        if not session_id.startswith(PREFIX) or len(session_id) > 8192:
            return None
        text = session_id[len(PREFIX):]
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            state = json.loads(self.aead.decrypt(raw[:12], raw[12:], PREFIX.encode()))
        except (ValueError, InvalidTag):
            return None
        return state if isinstance(state, dict) else None


def _client(scope: Scope) -> str:
    caller = scope.get("state", {}).get(CALLER_KEY)
    return caller.client if isinstance(caller, Caller) else ""


def _header(scope: Scope, name: str) -> str | None:
    wanted = name.lower().encode()
    return next((v.decode("latin-1") for k, v in scope["headers"] if k == wanted), None)


async def _refuse(send: Any, status: int, message: str) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None,
                       "error": {"code": INVALID_REQUEST if status != 503 else INTERNAL_ERROR,
                                 "message": message}}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


class SealedSessions:
    """The ASGI app of ``/mcp`` with sessions any process on the store can carry on; ``run`` is
    its lifespan (the face's, entered once). ``store``: what the processes tell each other,
    and the events of the sessions' streams (a broken stream resumes on any of them)."""

    def __init__(self, server: FaceServer, *, secret: str, store: SessionStore,
                 security: TransportSecuritySettings,
                 retry_interval: int | None, max_body_bytes: int) -> None:
        self.server, self.seal, self.store = server, SessionSeal(secret), store
        # a body past the cap is refused 413 before anything reads it whole
        self.limited = RequestBodyLimitMiddleware(self._sessioned, max_body_bytes)
        self.events, self.security = StoredEvents(store.db, alive=store.alive), security
        self.ids: RequestIds | None = None
        self.retry_interval = retry_interval
        self.modern = StreamableHTTPSessionManager(
            server, stateless=True, security_settings=security,
            max_request_body_size=max_body_bytes)
        self.held: dict[str, tuple[StreamableHTTPServerTransport, str]] = {}
        self.scopes: dict[str, Scope] = {}
        """The last request of each session held here (a relayed answer is handed in as it)."""
        self.answers = AnswerRelay(store, self._deliver)
        self.resuming = anyio.Lock()
        self.group: TaskGroup | None = None

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        number = await anyio.to_thread.run_sync(self.store.process_number)
        self.ids, self.events.process = RequestIds(number), number
        async with self.modern.run(), anyio.create_task_group() as group:
            self.group = group
            # a stream of a call this process runs, resumed on another, is followed as long
            # as this process says it is alive
            group.start_soon(beating, self.store, number)
            group.start_soon(self.answers.follow)
            group.start_soon(self._follow_ends)
            try:
                yield
            finally:
                self.group = None
                group.cancel_scope.cancel()
                self.held.clear()
                self.scopes.clear()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        version = _header(scope, MCP_PROTOCOL_VERSION_HEADER)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            await self.modern.handle_request(scope, receive, send)
            return
        await self.limited(scope, receive, send)

    async def _sessioned(self, scope: MutableMapping[str, Any], receive: Any, send: Any
                         ) -> None:
        scope = cast(Scope, scope)
        session_id = _header(scope, MCP_SESSION_ID_HEADER)
        body = await _body(receive) if scope["method"] == "POST" else None
        replay = _replaying(body, receive) if body is not None else receive
        if session_id is None:
            await self._open(scope, body or b"", replay, send)
            return
        held = self.held.get(session_id)
        if held is None:
            async with self.resuming:  # two requests of one session at once: one resumes it
                held = self.held.get(session_id) or await self._resume(session_id,
                                                                       _client(scope))
        if held is None or held[1] != _client(scope):
            await _refuse(send, 404, "Session not found")
            return
        self.scopes[session_id] = scope
        if await self._relayed(session_id, _message(body), send):
            return
        transport = held[0]
        if scope["method"] == "DELETE":  # the client ends it: for every process on the store,
            await anyio.to_thread.run_sync(partial(  # before it is told so
                self.store.end, session_id, keep_s=MAX_AGE_S))
        await self._handle(session_id, transport, _message(body), scope, replay, send)
        if transport.is_terminated:
            await self._discard(session_id, transport)

    async def _handle(self, session_id: str, transport: StreamableHTTPServerTransport,
                      message: Any, scope: Scope, receive: Any, send: Any) -> None:
        """The request, with a client request it carries noted as running here until its
        answer is sent (a cancellation reaching another process is then brought here)."""
        running = request_id(message)
        if running is not None:
            self.answers.started(session_id, running)
        try:
            await transport.handle_request(scope, receive, send)
        finally:
            if running is not None:
                self.answers.finished(session_id, running)

    async def _relayed(self, session_id: str, message: Any, send: Any) -> bool:
        """Whether ``message`` is an answer to a request another process sent, or cancels a
        request running on no process but another (and so was passed on to it through the
        store, the client told it was accepted)."""
        cancelled = cancelled_id(message)
        if cancelled is not None and not self.answers.runs(session_id, cancelled):
            await self.answers.pass_cancel(session_id, message)
        elif not is_answer(message) or self.answers.mine(session_id, message):
            return False
        else:
            await self.answers.pass_on(session_id, message)
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return True

    async def _follow_ends(self) -> None:
        """Sessions ended through another process are dropped here within ``ENDS_POLL_S``."""
        since = time.time() - ENDS_POLL_S
        while True:
            await anyio.sleep(ENDS_POLL_S)
            if not self.held:
                since = time.time() - ENDS_POLL_S
                continue
            try:  # ten seconds back: another machine's clock may be a little behind
                ended = await anyio.to_thread.run_sync(self.store.ended_since, since - 10)
            except Exception:  # the store is away for a moment: the next poll tries again
                logger.warning("could not read the ended sessions", exc_info=True)
                continue
            since = max([since, *(at for _, at in ended)])
            gone = {session for session, _ in ended}
            if not gone:
                continue
            for session_id, (transport, _) in list(self.held.items()):
                if digest(session_id) in gone:
                    await self._discard(session_id, transport)

    async def _open(self, scope: Scope, body: bytes, receive: Any, send: Any) -> None:
        """A request without a session: an ``initialize`` opens one, its id sealing what the
        client declared (any other request is refused by the transport, and nothing is kept)."""
        client = _client(scope)
        params = _sealable(_initialize_params(body))
        if isinstance(params, str):
            await _refuse(send, 400, params)
            return
        session_id = self.seal.seal({"c": client, "p": params, "t": int(time.time())})
        transport = await self._start(session_id, client, None)
        if transport is None:
            await _refuse(send, 503, "Too many open sessions")
            return
        status: list[int] = []

        async def watch(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        try:
            await transport.handle_request(scope, receive, watch)
        finally:
            if not status or status[0] >= 400:
                await self._discard(session_id, transport)
            else:
                self.scopes[session_id] = scope

    async def _deliver(self, session_id: str, message: dict[str, Any]) -> None:
        """An answer another process took in, handed to this process's session as if the
        client had sent it here."""
        held, scope = self.held.get(session_id), self.scopes.get(session_id)
        if held is None or scope is None:
            return
        data = json.dumps(message).encode()
        headers = [(k, v) for k, v in scope["headers"]
                   if k not in (b"content-length", b"content-type", b"accept")]
        headers += [(b"content-type", b"application/json"), (b"content-length",
                    str(len(data)).encode()), (b"accept", b"application/json, text/event-stream")]
        inner = {**scope, "method": "POST", "headers": headers}

        async def discard(_message: MutableMapping[str, Any]) -> None:
            return None

        await held[0].handle_request(inner, _replaying(data, _nothing), discard)

    async def _resume(self, session_id: str, client: str
                      ) -> tuple[StreamableHTTPServerTransport, str] | None:
        """A session another process opened (or this one, before it dropped it): carried on
        from its sealed state, for the client it was opened for only."""
        state = self.seal.open(session_id)
        if state is None or state.get("c") != client or not isinstance(state.get("p"), dict) \
                or time.time() - float(state.get("t", 0)) > MAX_AGE_S:
            return None
        if await anyio.to_thread.run_sync(self.store.ended, session_id):
            return None
        try:
            params = InitializeRequestParams.model_validate(state["p"], by_name=False)
        except ValueError:
            return None
        transport = await self._start(session_id, client, params)
        return None if transport is None else (transport, client)

    async def _start(self, session_id: str, client: str,
                     params: InitializeRequestParams | None
                     ) -> StreamableHTTPServerTransport | None:
        if self.group is None:
            raise RuntimeError("the session manager is not running (enter run() first)")
        if len(self.held) >= MAX_SESSIONS:
            return None
        transport = StreamableHTTPServerTransport(
            mcp_session_id=session_id, event_store=SessionEvents(self.events, session_id),
            security_settings=self.security, retry_interval=self.retry_interval,
            idle_timeout=IDLE_S)
        await self.group.start(self._serve, session_id, transport, params)
        # held only once connected: a second request of the session meanwhile waits in
        # ``resuming`` rather than reach a transport whose streams are not open yet
        self.held[session_id] = (transport, client)
        return transport

    async def _serve(self, session_id: str, transport: StreamableHTTPServerTransport,
                     params: InitializeRequestParams | None, *,
                     task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The session's server loop until the client ends it, it idles out, or we stop."""
        async with transport.connect() as (read_stream, write_stream):
            task_status.started()
            watched = WatchedWrites(write_stream, partial(self.answers.sent, session_id))
            dispatcher = NumberedDispatcher(read_stream, watched, ids=self.ids or RequestIds(0),
                                            inline_methods=frozenset({"initialize"}))
            connection = _connection(dispatcher, session_id, params)
            try:
                with transport.idle_scope or anyio.CancelScope():
                    await serve_connection(self.server, dispatcher, connection=connection,
                                           lifespan_state=self.server.face.state)
            except Exception:
                logger.exception("MCP session %s ended on an error", session_id[:24])
            finally:
                await self._discard(session_id, transport)

    async def _discard(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        if self.held.get(session_id, (None,))[0] is transport:
            del self.held[session_id]
            self.scopes.pop(session_id, None)
            self.answers.forget(session_id)
        if not transport.is_terminated:
            with anyio.CancelScope(shield=True):
                await transport.terminate()


def _connection(dispatcher: NumberedDispatcher, session_id: str,
                params: InitializeRequestParams | None) -> Connection:
    """A new session's connection (ready once the client says it is initialized), or a resumed
    one's: ready at once, with what the client declared at its handshake."""
    if params is None:
        return Connection.for_loop(dispatcher, session_id=session_id)
    version = params.protocol_version if params.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS \
        else LATEST_HANDSHAKE_VERSION
    connection = Connection.for_loop(dispatcher, session_id=session_id,
                                     protocol_version_hint=version)
    connection.client_params = params
    connection.initialized.set()
    return connection


async def _body(receive: Any) -> bytes:
    """The whole body of a request (``RequestBodyLimitMiddleware`` has capped its size)."""
    body, more = b"", True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message["type"] == "http.request" and message.get("more_body", False)
    return body


def _replaying(body: bytes, receive: Any) -> Any:
    """``receive`` with ``body`` read again first."""
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return await receive()  # type: ignore[no-any-return]
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


async def _nothing() -> dict[str, Any]:
    """A request that was never a connection: it is over once read."""
    return {"type": "http.disconnect"}


def _message(body: bytes | None) -> Any:
    try:
        return json.loads(body) if body else None
    except (ValueError, RecursionError):  # the transport answers it: 400, parse error
        return None


def _initialize_params(body: bytes) -> dict[str, Any] | None:
    """The params of an ``initialize`` request, as sent (``None`` for anything else)."""
    message = _message(body)
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return None
    params = message.get("params")
    return params if isinstance(params, dict) else None


def _sealable(params: dict[str, Any] | None) -> dict[str, Any] | str | None:
    """What a session id seals of ``initialize``'s params: what the session is carried on
    with (the version, the client's capabilities and name), within ``SEALED_PARAMS_BYTES``:
    past it, the client's description, icons and ``experimental`` capabilities are left out,
    and params still too big are a reason (``str``) to refuse the handshake. Anything else
    the params carry is never sealed: an id stays a header every client and proxy takes."""
    if params is None:
        return None
    kept: dict[str, Any] = {k: params[k] for k in ("protocolVersion", "capabilities",
                                                   "clientInfo") if k in params}
    if _size(kept) <= SEALED_PARAMS_BYTES:
        return kept
    info, capabilities = kept.get("clientInfo"), kept.get("capabilities")
    if isinstance(info, dict):
        kept["clientInfo"] = {k: info[k] for k in ("name", "version", "title") if k in info}
    if isinstance(capabilities, dict):
        kept["capabilities"] = {k: v for k, v in capabilities.items() if k != "experimental"}
    size = _size(kept)
    if size <= SEALED_PARAMS_BYTES:
        return kept
    return (f"the initialize request's protocolVersion, capabilities and clientInfo take "
            f"{size:,} bytes as JSON; a session keeps at most {SEALED_PARAMS_BYTES:,}: send "
            "shorter ones")


def _size(value: object) -> int:
    return len(json.dumps(value, separators=(",", ":"), default=str))
