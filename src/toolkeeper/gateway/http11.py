"""The lean path's HTTP/1.1 connections to a plain ``http://`` upstream: kept alive, one
request at a time each, parsed by h11 — under the httpx client the SDK's transport is given
(its headers, authorization and the cap on answer sizes stay the httpx client's). Only the
requests marked ``LEAN`` (``request.extensions``) take them; the SDK's own requests keep
httpx's transport.

httpx's own transport (httpcore: a connection pool with its locks, a stream backend and h11
behind several layers) spent about 230 µs more per request than h11 over a bare socket on the
machine the gateway's benchmark runs on, where a relayed call's whole budget is a millisecond.
An ``https://`` upstream keeps httpx's transport (its TLS and certificate handling).

A connection is reused only after its answer was read to the end and both sides agree to keep
it (h11 says so), and only if the upstream has not closed it meanwhile (checked before each
reuse); anything else closes it. A request is never sent twice: an error after it was written
is the request's error.
"""

from __future__ import annotations

import select
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.abc

__all__ = ["LEAN", "KeptAlive"]

LEAN = "toolkeeper_lean"
"""The request extension that sends a request over ``KeptAlive``."""

IDLE_KEPT = 16
"""Idle connections kept per upstream at most (more are closed as they come back)."""
CHUNK = 65536


class _Connection:
    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        import h11

        self.stream = stream
        self.h11 = h11.Connection(h11.CLIENT)

    async def event(self, timeout: float | None) -> Any:
        """The next h11 event, reading from the socket as needed (at most ``timeout`` s each
        read: httpx's ``ReadTimeout`` past it)."""
        import h11
        import httpx2

        while True:
            try:
                event = self.h11.next_event()
            except h11.ProtocolError as exc:  # what httpx says of a broken answer
                raise httpx2.RemoteProtocolError(str(exc) or type(exc).__name__) from exc
            if event is not h11.NEED_DATA:
                return event
            try:
                with anyio.fail_after(timeout):
                    data = await self.stream.receive(CHUNK)
            except TimeoutError as exc:
                raise httpx2.ReadTimeout("the upstream sent nothing in time") from exc
            except anyio.EndOfStream:
                data = b""
            except (OSError, anyio.BrokenResourceError) as exc:
                raise httpx2.ReadError(str(exc) or type(exc).__name__) from exc
            self.h11.receive_data(data)

    def alive(self) -> bool:
        """Whether an idle connection can carry a request: nothing to read on it (an idle
        connection that is readable was closed by the upstream, or holds what no request
        asked for), as httpx checks its own."""
        raw = self.stream.extra(anyio.abc.SocketAttribute.raw_socket)
        try:
            readable, _, _ = select.select([raw.fileno()], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable


class _Answer:
    """A response's body, read from its connection as httpx asks for it; the connection goes
    back to the pool once the body was read to its end, and is closed otherwise."""

    def __init__(self, pool: KeptAlive, connection: _Connection, timeout: float | None) -> None:
        self.pool = pool
        self.connection: _Connection | None = connection
        self.timeout = timeout
        self.ended = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        import h11

        while not self.ended and self.connection is not None:
            event = await self.connection.event(self.timeout)
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                self.ended = isinstance(event, h11.EndOfMessage)
                if not self.ended:
                    import httpx2

                    raise httpx2.RemoteProtocolError("the upstream closed the connection "
                                                     "before its answer ended")

    async def aclose(self) -> None:
        import h11

        connection, self.connection = self.connection, None
        if connection is None:
            return
        if self.ended and connection.h11.our_state is h11.DONE \
                and connection.h11.their_state is h11.DONE:
            connection.h11.start_next_cycle()
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
        import h11
        import httpx2

        if request.url.scheme != "http":
            return await self.tls.handle_async_request(request)
        body = await request.aread()
        connection = await self._connection(request)
        try:
            head = h11.Request(method=request.method, target=request.url.raw_path,
                               headers=list(request.headers.raw))
            data = connection.h11.send(head) or b""
            if body:
                data += connection.h11.send(h11.Data(data=body)) or b""
            data += connection.h11.send(h11.EndOfMessage()) or b""
            await connection.stream.send(data)
            _, read = _timeouts(request)
            event = await connection.event(read)
            while isinstance(event, h11.InformationalResponse):
                event = await connection.event(read)
            if not isinstance(event, h11.Response):
                raise httpx2.RemoteProtocolError("the upstream closed the connection "
                                                 "without an answer")
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                await connection.stream.aclose()
            if isinstance(exc, OSError | anyio.BrokenResourceError | h11.ProtocolError):
                raise httpx2.RemoteProtocolError(str(exc) or type(exc).__name__) from exc
            raise
        return httpx2.Response(event.status_code, headers=list(event.headers),
                               stream=self._answer(self, connection, read),
                               extensions={"http_version": b"HTTP/1.1"})

    async def aclose(self) -> None:
        for connection in self._idle:
            await connection.stream.aclose()
        self._idle.clear()
