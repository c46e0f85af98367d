"""``toolkeeper serve`` answers a malformed JSON-RPC envelope as JSON-RPC 2.0 says, in one short
message: not JSON is -32700 (Parse error), a body that is not a request, a notification or a
response is -32600 (Invalid Request), with ``id`` null when the id itself is what is wrong —
never a validation dump, and never an invalid id taken for a notification. Valid requests,
notifications and the official client are served as before."""

from __future__ import annotations

import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .test_serve import CLIENT_TOKENS, _start
from .test_serve_exchange import HEADERS, TOOLS, _legacy

pytestmark = pytest.mark.anyio


DATABASES: dict[str, Path] = {}


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp_path: Path = tmp_path_factory.mktemp("envelope")
    module = tmp_path / "things.py"
    module.write_text(TOOLS)
    proc, address = _start(tmp_path, tools=str(module))
    DATABASES[address] = tmp_path / "state" / "toolkeeper.db"
    yield address
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=20)


def _raw(url: str, body: bytes, **headers: str) -> httpx.Response:
    return httpx.post(f"{url}/mcp", content=body, timeout=30, headers={
        **HEADERS, "Content-Type": "application/json",
        "Authorization": f"Bearer {CLIENT_TOKENS[url]}", **headers})


INVALID = [
    (b'{"jsonrpc": "1.0", "id": 1, "method": "tools/list"}', 1),
    (b'{"id": 2, "method": "tools/list"}', 2),
    (b'{"jsonrpc": "2.0", "id": 3, "method": 42}', 3),
    (b'{"jsonrpc": "2.0", "id": 4}', 4),
    (b'{"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": "all"}', 5),
    (b'{"jsonrpc": "2.0", "id": {"x": 1}, "method": "tools/list"}', None),
    (b'{"jsonrpc": "2.0", "id": [1], "method": "tools/call"}', None),
    (b'{"jsonrpc": "2.0", "id": true, "method": "tools/list"}', None),
    (b'{"jsonrpc": "2.0", "id": null, "method": "tools/list"}', None),
    (b'{"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}', None),
    (b'"tools/list"', None),
    (b"42", None),
    (b"[]", None),
    (b'[{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]', None),  # no batches in MCP
    (b'{"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": [1, 2]}', 6),
]


@pytest.mark.parametrize(("body", "ident"), INVALID)
def test_an_invalid_envelope_is_an_invalid_request_in_one_short_message(
        url: str, body: bytes, ident: int | None) -> None:
    answer = _raw(url, body)
    assert answer.status_code == 400
    reply = answer.json()
    assert reply["jsonrpc"] == "2.0" and reply["id"] == ident
    assert reply["error"]["code"] == -32600
    assert len(answer.content) < 300
    assert "\n" not in reply["error"]["message"]


@pytest.mark.parametrize("body", [b"{not json", b'{"jsonrpc": "2.0", "id": 1, "method"', b""])
def test_a_body_that_is_not_json_is_a_parse_error(url: str, body: bytes) -> None:
    answer = _raw(url, body)
    assert answer.status_code == 400
    reply = answer.json()
    assert reply == {"jsonrpc": "2.0", "id": None,
                     "error": {"code": -32700, "message": reply["error"]["message"]}}
    assert len(answer.content) < 300


def test_valid_requests_and_notifications_are_served_as_before(url: str) -> None:
    listed = _raw(url, b'{"jsonrpc": "2.0", "id": "l1", "method": "tools/list"}')
    assert listed.status_code == 200 and listed.json()["id"] == "l1"
    called = _raw(url, b'{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": '
                       b'{"name": "add", "arguments": {"a": 1, "b": 2}}}')
    assert called.json()["result"]["structuredContent"] == {"result": 3}
    note = _raw(url, b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
    assert note.status_code == 202 and note.content == b""
    pinged = _raw(url, b'{"jsonrpc": "2.0", "id": 0, "method": "ping"}')
    assert pinged.status_code == 200 and '"id":0' in pinged.text
    bad_params = _raw(url, b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", '
                           b'"params": {"arguments": {}}}')
    assert bad_params.json()["error"]["code"] == -32602  # the envelope is fine: params are not
    refused = _raw(url, b'{"jsonrpc": "1.0"}', Host="evil.example")
    assert refused.status_code == 421  # the transport's own refusals come first


async def test_the_official_client_still_works(url: str) -> None:
    async with _legacy(url) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        right = await client.call_tool("add", {"a": 2, "b": 40})
    assert "add" in names
    assert right.structured_content == {"result": 42}


def test_arguments_nesting_900_levels_are_refused_and_recorded(url: str) -> None:
    nested = "1"
    for _ in range(900):
        nested = f"[{nested}]"
    body = ('{"jsonrpc": "2.0", "id": "deep", "method": "tools/call", "params": {"name": "add", '
            f'"arguments": {{"a": 1, "b": 2, "pad": {nested}}}}}}}').encode()
    answer = _raw(url, body)
    result = answer.json()["result"]
    assert result["isError"] and "max_argument_depth" in result["content"][0]["text"]
    with sqlite3.connect(DATABASES[url]) as db:
        rows = db.execute("SELECT status, arguments FROM audit WHERE tool = 'add' AND "
                          "error_code = 'invalid_arguments'").fetchall()
    assert len(rows) == 1 and rows[0][0] == "error" and "max_argument_depth" in rows[0][1]
