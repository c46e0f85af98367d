"""A plain relayed call posted by the gateway itself (the lean path, handed straight to the
connection's transport) against an upstream that answers it badly: bytes that are not HTTP, an
answer cut off by a closed connection, an answer over the cap, one that is not JSON-RPC, and
silence. Each is an error result that says which upstream failed, within the call's own
deadline, and the same upstream answers calls again (at once, or once the broken connection's
backoff is over).

The upstream is a real HTTP server on loopback that answers the handshake and the listing as an
MCP server does (the 2025-11-25 revision, JSON answers) and each ``tools/call`` as the test
asks."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import pytest

from toolkeeper import ToolInvoker
from toolkeeper.config import MCPServerConfig
from toolkeeper.gateway.gateway import MCPGateway
from toolkeeper.toolbox import Toolbox

from .test_gateway import _invoke

pytestmark = pytest.mark.anyio

CAP = 4096
ADD = {"name": "add", "description": "Add two integers.",
       "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"},
                                                        "b": {"type": "integer"}}}}


class _Upstream(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answer = "ok"
        self.tools: list[dict[str, Any]] = [ADD]
        """What ``tools/list`` answers."""
        """How the next ``tools/call`` is answered (one of ``ANSWERS``' keys, or ``ok``)."""
        self.released = threading.Event()
        self.calls = 0
        self.cookie: str | None = None
        """A cookie to set with the answer to ``initialize``."""
        self.cookies_seen: list[str | None] = []
        """The ``cookie`` header of each ``tools/call``."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Upstream

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._json(405, None)

    def do_DELETE(self) -> None:
        self._json(405, None)

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["content-length"])))
        method, ident = message.get("method"), message.get("id")
        if ident is None:
            self._json(202, None)
        elif method == "initialize":
            self._json(200, {"jsonrpc": "2.0", "id": ident, "result": {
                "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "1"}}})
        elif method == "tools/list":
            self._json(200, {"jsonrpc": "2.0", "id": ident, "result": {"tools": self.server.tools}})
        elif method == "tools/call":
            self.server.calls += 1
            self.server.cookies_seen.append(self.headers.get("cookie"))
            answer, self.server.answer = self.server.answer, "ok"
            if answer == "ok":
                args = message["params"]["arguments"]
                self._json(200, {"jsonrpc": "2.0", "id": ident, "result": {
                    "content": [{"type": "text", "text": str(args["a"] + args["b"])}],
                    "isError": False}})
            else:
                ANSWERS[answer](self, ident)
        else:
            self._json(200, {"jsonrpc": "2.0", "id": ident, "error": {
                "code": -32601, "message": "Method not found"}})

    def _json(self, status: int, body: Any) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        if self.server.cookie and isinstance(body, dict) and "protocolVersion" in str(body):
            self.send_header("set-cookie", self.server.cookie)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _raw(self, data: bytes) -> None:
        self.wfile.write(data)
        self.wfile.flush()
        self.close_connection = True


def _not_http(handler: _Handler, ident: Any) -> None:
    handler._raw(b"SURPRISE\x00\r\n\r\n")


def _cut_off(handler: _Handler, ident: Any) -> None:
    handler._raw(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                 b"content-length: 500\r\n\r\n" + json.dumps({"jsonrpc": "2.0", "id": ident}
                                                           ).encode()[:-1])


def _over_the_cap(handler: _Handler, ident: Any) -> None:
    handler._json(200, {"jsonrpc": "2.0", "id": ident, "result": {
        "content": [{"type": "text", "text": "x" * (CAP * 4)}], "isError": False}})


def _not_json_rpc(handler: _Handler, ident: Any) -> None:
    handler._json(200, {"hello": ["not", "an", "answer"]})


def _silent(handler: _Handler, ident: Any) -> None:
    handler.server.released.wait(60)  # until the test ends (the call's deadline ends it first)
    handler.close_connection = True


ANSWERS = {"not HTTP": _not_http, "cut off": _cut_off, "over the cap": _over_the_cap,
           "not JSON-RPC": _not_json_rpc, "silent": _silent}


@pytest.fixture
def upstream() -> Iterator[_Upstream]:
    server = _Upstream()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.released.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)


@pytest.mark.parametrize("answer", ANSWERS)
async def test_a_lean_call_answered_badly_is_an_error_and_the_next_call_is_answered(
        upstream: _Upstream, answer: str) -> None:
    url = f"http://127.0.0.1:{upstream.server_address[1]}/mcp"
    config = MCPServerConfig(name="up", url=url, risk="safe", connect_timeout_s=10,
                             call_timeout_s=2 if answer == "silent" else 30,
                             max_result_bytes=CAP)
    toolbox = Toolbox()
    async with MCPGateway([config]) as gateway:
        await gateway.attach(toolbox)
        link = gateway.upstream("up")._lean
        invoker = ToolInvoker(toolbox)
        assert (await _invoke(invoker, "up-add", a=1, b=2)).text == "3"  # type: ignore[attr-defined]
        assert link is not None and link._direct()  # the path under test

        upstream.answer = answer
        failed = await _invoke(invoker, "up-add", a=2, b=2)
        assert failed.status == "error", failed  # type: ignore[attr-defined]
        said = failed.text  # type: ignore[attr-defined]
        assert "MCP server 'up'" in said or "tool 'up-add' did not finish within 2 s" in said

        with anyio.fail_after(60):  # a dropped connection is opened again after its backoff
            while (again := await _invoke(invoker, "up-add", a=20, b=22)).status != "ok":  # type: ignore[attr-defined]
                assert "MCP server 'up'" in again.text  # type: ignore[attr-defined]
                await anyio.sleep(0.2)
        assert again.text == "42"  # type: ignore[attr-defined]
    assert upstream.calls == 3


async def test_a_cookie_the_upstream_set_goes_with_a_lean_call_as_with_the_client_s_own(
        upstream: _Upstream) -> None:
    upstream.cookie = "route=b7; Path=/"
    url = f"http://127.0.0.1:{upstream.server_address[1]}/mcp"
    toolbox = Toolbox()
    async with MCPGateway([MCPServerConfig(name="up", url=url, risk="safe")]) as gateway:
        await gateway.attach(toolbox)
        invoker = ToolInvoker(toolbox)
        assert (await _invoke(invoker, "up-add", a=1, b=2)).text == "3"  # type: ignore[attr-defined]
    assert upstream.cookies_seen == ["route=b7"]
