"""The lean path's kept-alive connections (``gateway/http11.py``) against a real HTTP server on
loopback: a connection is reused while the server keeps it, and one the server closed while it
was idle is not reused (the next request opens another instead of failing)."""

from __future__ import annotations

from contextlib import suppress

import anyio
import anyio.abc
import httpx2
import pytest

from toolkeeper.gateway.http11 import LEAN, KeptAlive

pytestmark = pytest.mark.anyio

class _Through(httpx2.AsyncBaseTransport):
    """``KeptAlive`` as the gateway's capped transport holds it (it hands requests on)."""

    def __init__(self, kept: KeptAlive) -> None:
        self.kept = kept

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response: httpx2.Response = await self.kept.handle_async_request(request)
        return response

    async def aclose(self) -> None:
        await self.kept.aclose()


ANSWER = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"


async def _serve(listener: anyio.abc.Listener[anyio.abc.SocketStream], accepted: list[int],
                 close_after: int, answered: anyio.abc.ObjectSendStream[int]) -> None:
    """Answer each request with ``{}``; after ``close_after`` answers on one connection, close
    it without saying so (as a server does when its keep-alive time is up)."""

    async def handle(stream: anyio.abc.SocketStream) -> None:
        accepted.append(1)
        async with stream:
            for done in range(1, close_after + 1):
                seen = b""
                while b"\r\n\r\n" not in seen:
                    seen += await stream.receive()
                await stream.send(ANSWER)
                if done < close_after:
                    await answered.send(done)
        await answered.send(close_after)  # this connection is closed now

    await listener.serve(handle)


@pytest.mark.parametrize("close_after", [1, 3])
async def test_a_kept_connection_is_reused_and_one_the_server_closed_is_not(
        close_after: int) -> None:
    accepted: list[int] = []
    sent, answered = anyio.create_memory_object_stream[int](10)
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    kept = KeptAlive(httpx2.AsyncHTTPTransport())
    async with anyio.create_task_group() as group, listener, \
            httpx2.AsyncClient(transport=_Through(kept)) as client:
        group.start_soon(_serve, listener, accepted, close_after, sent)
        for _ in range(3):
            response = await client.post(f"http://127.0.0.1:{port}/mcp", content=b"{}",
                                         extensions={LEAN: True})
            assert response.status_code == 200 and response.json() == {}
            if close_after == 1:  # the server has closed the connection before the next call
                with anyio.fail_after(10):
                    await answered.receive()
        group.cancel_scope.cancel()
    assert len(accepted) == (3 if close_after == 1 else 1)


# An upstream that answers each request on a connection with the bytes the test gives, then
# keeps the connection, closes it, or shuts its writing side.
OK = ANSWER
CHUNKED = (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
           b"1\r\n{\r\n1\r\n}\r\n0\r\n\r\n")
CASES: dict[str, tuple[bytes, str, str | None]] = {
    # name: (answer, then, the error's type name or None when the answer is read)
    "chunked": (CHUNKED, "keep", None),
    "interim answers first": (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n"
                              b"x-interim: 1\r\n\r\n" + OK, "keep", None),
    "Connection: close": (b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\n{}",
                          "close", None),
    "HTTP/1.0 with a length": (b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\n{}", "keep", None),
    "HTTP/1.0 ended by the close": (b"HTTP/1.0 200 OK\r\n\r\n{}", "close", None),
    "closed without an answer": (b"", "close", "RemoteProtocolError"),
    "half-closed without an answer": (b"", "shutdown", "RemoteProtocolError"),
    "cut off": (b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n{}", "close",
                "RemoteProtocolError"),
    "chunks cut off": (CHUNKED[:-7], "close", "RemoteProtocolError"),
    "a head over the cap": (b"HTTP/1.1 200 OK\r\n" + b"x-filler: " + b"a" * 70000 + b"\r\n",
                            "keep", "RemoteProtocolError"),
    "a malformed status line": (b"HTTP/1.1 2OO OK\r\ncontent-length: 2\r\n\r\n{}", "keep",
                                "RemoteProtocolError"),
    "not HTTP": (b"SURPRISE\x00\r\n\r\n", "keep", "RemoteProtocolError"),
    "switching protocols": (b"HTTP/1.1 101 Switching Protocols\r\nupgrade: h2c\r\n"
                            b"connection: upgrade\r\n\r\n", "keep", "RemoteProtocolError"),
    "silence": (b"", "keep", "ReadTimeout"),
    "bytes after the answer": (OK + b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n", "keep",
                               None),
}


async def _scripted(listener: anyio.abc.Listener[anyio.abc.SocketStream],
                    answers: list[tuple[bytes, str]], seen: list[bytes],
                    connections: list[int]) -> None:
    async def handle(stream: anyio.abc.SocketStream) -> None:
        connections.append(1)
        async with stream:
            while answers:
                request = b""
                while b"\r\n\r\n" not in request:
                    try:
                        request += await stream.receive()
                    except (anyio.EndOfStream, anyio.BrokenResourceError):
                        return
                seen.append(request)
                answer, then = answers.pop(0)
                await stream.send(answer) if answer else None
                if then == "close":
                    return
                if then == "shutdown":
                    await stream.send_eof()
                    with anyio.move_on_after(30), suppress(anyio.EndOfStream, OSError,
                                                            anyio.BrokenResourceError):
                        await stream.receive()  # until the client closes its side
                    return
            await anyio.sleep_forever()

    await listener.serve(handle)


async def _post(kept: KeptAlive, port: int, timeout: float = 30, **headers: str) -> bytes:
    request = httpx2.Request("POST", f"http://127.0.0.1:{port}/mcp", content=b"{}",
                             headers=headers, extensions={"timeout": {"connect": 30,
                                                                      "read": timeout}})
    answer = await kept.handle_async_request(request)
    try:
        return b"".join([chunk async for chunk in answer.stream])
    finally:
        await answer.stream.aclose()


@pytest.mark.parametrize("case", CASES)
async def test_an_answer_of_each_kind_is_read_or_is_a_clear_error_and_the_next_call_is_answered(
        case: str) -> None:
    answer, then, error = CASES[case]
    answers = [(answer, then), (OK, "keep")]  # on a second connection if the first ends
    seen: list[bytes] = []
    connections: list[int] = []
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    kept = KeptAlive(httpx2.AsyncHTTPTransport())
    async with listener, anyio.create_task_group() as group:
        group.start_soon(_scripted, listener, answers, seen, connections)
        with anyio.fail_after(60):
            if error is None:
                assert await _post(kept, port) == b"{}"
            else:
                with pytest.raises(httpx2.TransportError) as raised:
                    await _post(kept, port, timeout=0.5 if case == "silence" else 30)
                assert type(raised.value).__name__ == error, raised.value
                assert str(raised.value)
            assert await _post(kept, port) == b"{}"  # kept, or another connection
        group.cancel_scope.cancel()
    await kept.aclose()
    assert len(seen) == 2  # each request sent once
    # a connection is reused only after a whole answer both sides keep, nothing after it
    assert len(connections) == (1 if case in ("chunked", "interim answers first") else 2)


@pytest.mark.parametrize("header", [("x-evil", "a\r\nx-injected: 1"), ("x-evil", "a\nb"),
                                    ("x-evil", "a\rb"), ("x-evil", "a\x00b"),
                                    ("x evil", "a"), ("x:evil", "a")])
async def test_a_header_that_would_change_the_head_is_refused_before_anything_is_sent(
        header: tuple[str, str]) -> None:
    accepted: list[int] = []

    async def count(stream: anyio.abc.SocketStream) -> None:
        accepted.append(1)
        await stream.aclose()

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    kept = KeptAlive(httpx2.AsyncHTTPTransport())
    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, count)
        request = httpx2.Request("POST", f"http://127.0.0.1:{port}/mcp", content=b"{}")
        request.headers._list.append((header[0].encode(), header[0].lower().encode(),
                                      header[1].encode()))
        with pytest.raises(httpx2.LocalProtocolError):
            await kept.handle_async_request(request)
        group.cancel_scope.cancel()
    assert accepted == []
