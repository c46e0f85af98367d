"""The lean path's HTTP/1.1 connections to a plain ``http://`` upstream: kept alive, one
request at a time each, the request's head written by hand and the answer parsed by httptools
(llhttp, in C) — under the httpx client the SDK's transport is given (its headers,
authorization and the cap on answer sizes stay the httpx client's). Only the requests marked
``LEAN`` (``request.extensions``) take them; the SDK's own requests keep httpx's transport.

httpx's own transport (httpcore: a connection pool with its locks, a stream backend and h11
behind several layers) spent about 230 µs more per request than h11 over a bare socket on the
machine the gateway's benchmark runs on, where a relayed call's whole budget is a millisecond;
h11 itself (pure Python) was most of what was left of the transport.
An ``https://`` upstream keeps httpx's transport (its TLS and certificate handling).

A request's method, target, header names and values are checked before anything is written: a
CR, LF or NUL in a value (or a name that is not a token) is the request's error, so nothing can
be injected into the head. The answer's head may be at most ``MAX_HEAD`` bytes (counted while
it is read); its body is capped by the transport above. 1xx interim answers are skipped; a
``101`` is an error; a body is framed by its ``Content-Length``, chunked, or (with neither) by
the end of the connection.

A connection is reused only after its answer was read to the end and both sides agree to keep
it (the request did not say ``Connection: close``, and the answer is HTTP/1.1 without it, or
asks for keep-alive; nothing came after it), and only if the upstream has not closed it
meanwhile (checked before each reuse); anything else closes it. A request is never sent twice:
an error after it was written is the request's error.
"""

from __future__ import annotations

import re
import select
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.abc

__all__ = ["LEAN", "MAX_HEAD", "KeptAlive"]

LEAN = "toolkeeper_lean"
"""The request extension that sends a request over ``KeptAlive``."""

IDLE_KEPT = 16
"""Idle connections kept per upstream at most (more are closed as they come back)."""
CHUNK = 65536
MAX_HEAD = 65536
"""Bytes an answer's head (status line and headers, 1xx interim answers included) may take."""

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_BAD_VALUE = re.compile(rb"[\r\n\x00]")
_BAD_TARGET = re.compile(rb"[\x00-\x20\x7f]")
_FRAMING = (b"content-length", b"transfer-encoding")
_WITH_BODY = (b"POST", b"PUT", b"PATCH")


def request_head(method: bytes, target: bytes, headers: list[tuple[bytes, bytes]],
                 length: int) -> tuple[bytes, bool]:
    """The request's head as bytes, and whether it lets the connection be kept (no
    ``Connection: close``). ``Content-Length`` is written from ``length`` (the body is sent
    whole), any the headers carry — and any ``Transfer-Encoding`` — left out. A method or a
    header name that is not a token, a target with a space or a control byte, or a value with
    CR, LF or NUL raises ``httpx.LocalProtocolError``: nothing is written."""
    import httpx2

    if not _TOKEN.match(method):
        raise httpx2.LocalProtocolError(f"the method {method!r} is not an HTTP token")
    if not target or _BAD_TARGET.search(target):
        raise httpx2.LocalProtocolError(f"the target {target!r} holds a space or a control byte")
    keep = True
    parts = [method, b" ", target, b" HTTP/1.1\r\n"]
    for name, value in headers:
        if not _TOKEN.match(name):
            raise httpx2.LocalProtocolError(f"the header name {name!r} is not an HTTP token")
        if _BAD_VALUE.search(value):
            raise httpx2.LocalProtocolError(f"the header {name.decode()!r} holds CR, LF or NUL")
        lower = name.lower()
        if lower in _FRAMING:
            continue
        if lower == b"connection" and b"close" in value.lower():
            keep = False
        parts += (name, b": ", value, b"\r\n")
    if length or method in _WITH_BODY:
        parts += (b"Content-Length: ", str(length).encode(), b"\r\n")
    parts.append(b"\r\n")
    return b"".join(parts), keep


class _Connection:
    """A socket and the parse of the answer now on it (httptools' callbacks land here)."""

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self.stream = stream
        self.raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)

    def start(self) -> None:
        """A new answer to parse (one per request)."""
        import httptools

        self.parser = httptools.HttpResponseParser(self)
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.head_read = 0
        self.head_done = False
        self.framed = False  # Content-Length or Transfer-Encoding: not ended by the close
        self.body: list[bytes] = []
        self.complete = False
        self.keep = False
        self.after = False  # bytes came after the answer's end: never reused

    # httptools' callbacks
    def on_message_begin(self) -> None:
        if self.complete:
            self.after = True

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self.complete:
            self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        if self.complete:
            return
        status = self.parser.get_status_code()
        if 100 <= status < 200:  # an interim answer: its headers are not the answer's
            self.headers = []
            return
        self.status, self.head_done = status, True
        self.framed = any(name.lower() in _FRAMING for name, _ in self.headers)

    def on_body(self, body: bytes) -> None:
        if not self.complete:
            self.body.append(body)

    def on_message_complete(self) -> None:
        if self.head_done and not self.complete:
            self.complete = True
            self.keep = self.parser.should_keep_alive()

    async def read(self, timeout: float | None) -> None:
        """Read once from the socket (at most ``timeout`` s: httpx's ``ReadTimeout`` past it)
        and parse what came; the end of the connection ends an answer framed by it, and is
        an error for any other."""
        import httptools
        import httpx2

        try:
            with anyio.fail_after(timeout):
                data = await self.stream.receive(CHUNK)
        except TimeoutError as exc:
            raise httpx2.ReadTimeout("the upstream sent nothing in time") from exc
        except anyio.EndOfStream:
            if self.head_done and not self.framed and not self.complete:
                self.complete, self.keep = True, False
                return
            raise httpx2.RemoteProtocolError(
                "the upstream closed the connection before its answer ended" if self.head_done
                else "the upstream closed the connection without an answer") from None
        except (OSError, anyio.BrokenResourceError) as exc:
            raise httpx2.ReadError(str(exc) or type(exc).__name__) from exc
        if not self.head_done:
            self.head_read += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade as exc:
            raise httpx2.RemoteProtocolError("the upstream switched protocols (a 101 answer) "
                                             "on a request that asked for none") from exc
        except httptools.HttpParserError as exc:
            if not self.complete:
                raise httpx2.RemoteProtocolError(f"the upstream's answer is not HTTP/1.1: "
                                                 f"{exc}") from exc
            self.after = True
        if not self.head_done and self.head_read > MAX_HEAD:
            raise httpx2.RemoteProtocolError(f"the upstream's answer head is over {MAX_HEAD} "
                                             f"bytes")

    def reusable(self) -> bool:
        return self.complete and self.keep and not self.after

    def alive(self) -> bool:
        """Whether an idle connection can carry a request: nothing to read on it (an idle
        connection that is readable was closed by the upstream, or holds what no request
        asked for), as httpx checks its own."""
        try:
            readable, _, _ = select.select([self.raw], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable


class _Answer:
    """A response's body, read from its connection as httpx asks for it; the connection goes
    back to the pool once the body was read to its end, and is closed otherwise."""

    def __init__(self, pool: KeptAlive, connection: _Connection, timeout: float | None,
                 keep: bool) -> None:
        self.pool = pool
        self.connection: _Connection | None = connection
        self.timeout = timeout
        self.keep = keep

    async def __aiter__(self) -> AsyncIterator[bytes]:
        connection = self.connection
        while connection is not None:
            if connection.body:
                body, connection.body = connection.body, []
                yield b"".join(body)
            if connection.complete:
                return
            await connection.read(self.timeout)
            connection = self.connection

    async def aclose(self) -> None:
        connection, self.connection = self.connection, None
        if connection is None:
            return
        if self.keep and connection.reusable() and not connection.body:
            await self.pool.release(connection)
        else:
            await connection.stream.aclose()


def _timeouts(request: Any) -> tuple[float | None, float | None]:
    timeout = request.extensions.get("timeout") or {}
    return timeout.get("connect"), timeout.get("read")


class KeptAlive:
    """An httpx transport (``handle_async_request``) over kept-alive HTTP/1.1 connections for
    ``http://`` URLs; other schemes go to httpx's own transport."""

    def __init__(self, other: Any) -> None:
        import httpx2

        self.tls = other
        """Where a request for another scheme goes (httpx's own transport)."""
        self._idle: list[_Connection] = []
        # httpx takes a body that is its own kind of stream
        self._answer = type("Answer", (_Answer, httpx2.AsyncByteStream), {})

    async def release(self, connection: _Connection) -> None:
        if len(self._idle) < IDLE_KEPT:
            self._idle.append(connection)
        else:
            await connection.stream.aclose()

    async def _connection(self, request: Any) -> _Connection:
        while self._idle:
            kept = self._idle.pop()
            if kept.alive():
                return kept
            await kept.stream.aclose()
        import httpx2

        connect, _ = _timeouts(request)
        url = request.url
        try:
            with anyio.fail_after(connect):
                stream = await anyio.connect_tcp(url.host, url.port or 80)
        except TimeoutError as exc:
            raise httpx2.ConnectTimeout(f"no connection to {url.host} in time") from exc
        except OSError as exc:
            raise httpx2.ConnectError(str(exc) or type(exc).__name__) from exc
        return _Connection(stream)  # anyio sets TCP_NODELAY

    async def handle_async_request(self, request: Any) -> Any:
        import httpx2

        if request.url.scheme != "http" or request.method in ("HEAD", b"HEAD"):
            # (an answer to HEAD has a length and no body: the parser is not told the method)
            return await self.tls.handle_async_request(request)
        body = await request.aread()
        method = request.method
        head, keep = request_head(method if isinstance(method, bytes) else method.encode(),
                                  request.url.raw_path, list(request.headers.raw), len(body))
        connection = await self._connection(request)
        try:
            connection.start()
            await connection.stream.send(head + body if body else head)
            _, read = _timeouts(request)
            while not connection.head_done:
                await connection.read(read)
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                await connection.stream.aclose()
            if isinstance(exc, OSError | anyio.BrokenResourceError):
                raise httpx2.RemoteProtocolError(str(exc) or type(exc).__name__) from exc
            raise
        return httpx2.Response(connection.status, headers=connection.headers,
                               stream=self._answer(self, connection, read, keep),
                               extensions={"http_version": b"HTTP/1.1"})

    async def aclose(self) -> None:
        for connection in self._idle:
            await connection.stream.aclose()
        self._idle.clear()
