"""``toolkeeper serve`` over one kept-alive HTTP connection, the way the official client (and
most others) talk: every call answers, and the listening socket hands out connections that
send small writes at once (with Nagle's algorithm on, each answer after the first waited for
the client's delayed ACK)."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from toolkeeper.cli.serve_listen import bind_socket as _bind

from .test_serve import CLIENT_TOKENS, _start

TOOLS = '''
from toolkeeper import tool


@tool
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b
'''


async def test_ten_calls_in_a_row_on_one_kept_alive_connection_all_answer(
        tmp_path: Path) -> None:
    module = tmp_path / "adding.py"
    module.write_text(TOOLS)
    proc, url = _start(tmp_path, tools=str(module))
    peers: list[Any] = []

    async def note_connection(response: httpx2.Response) -> None:
        stream = response.extensions.get("network_stream")
        peers.append(stream.get_extra_info("client_addr") if stream is not None else None)

    try:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {CLIENT_TOKENS[url]}"},
                                  timeout=60, event_hooks={"response": [note_connection]})
        async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
            results = [await client.call_tool("add", {"a": n, "b": 100}) for n in range(10)]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    assert [r.structured_content for r in results] == [{"result": n + 100} for n in range(10)]
    assert not any(r.is_error for r in results)
    assert None not in peers and len(set(peers)) == 1  # one connection, kept alive throughout


async def test_connections_the_server_accepts_have_nagle_off() -> None:
    listener = _bind("127.0.0.1", 0)
    accepted: list[int] = []

    def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        accepted.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(on_connection, sock=listener)
    async with server:
        port = listener.getsockname()[1]
        _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(100):
            if accepted:
                break
            await asyncio.sleep(0.01)
        writer.close()
    assert accepted and accepted[0] != 0


def test_rate_limit_zero_turns_the_limit_off(tmp_path: Path) -> None:
    proc, url = _start(tmp_path, "--rate-limit", "0")
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    try:
        with httpx.Client(headers={"Authorization": f"Bearer {CLIENT_TOKENS[url]}",
                                   "Accept": "application/json, text/event-stream"},
                          timeout=10) as http:
            statuses = {http.post(f"{url}/mcp", json=body).status_code for _ in range(150)}
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    assert statuses == {200}  # past the default's burst of 100, none refused
    refused = subprocess.run([sys.executable, "-m", "toolkeeper.cli", "serve", "--rate-limit",
                              "-1", "--state-dir", str(tmp_path / "other")],
                             capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode != 0 and "--rate-limit" in refused.stderr
