"""The lean path's kept-alive connections (``gateway/http11.py``) against a real HTTP server on
loopback: a connection is reused while the server keeps it, and one the server closed while it
was idle is not reused (the next request opens another instead of failing)."""

from __future__ import annotations

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
