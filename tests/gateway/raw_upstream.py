"""An upstream MCP server that speaks raw JSON-RPC over stdio (no SDK), to say what the SDK's
server never would: ``python raw_upstream.py STATE_DIR``.

Tools: ``echo`` (answers its text), ``surrogate`` (answers text, a structured value and a
description-like key with lone surrogates), ``notobj`` (answers ``"result": 5``), ``ansi``
(writes a forged toolkeeper line, a terminal title and colours to stderr, then answers).
STATE_DIR/bigschema lists ``big`` too, whose input schema has 8,000 properties (about 2 MB);
STATE_DIR/badschema lists ``badschema`` too, whose input schema is not one
(``{"type": "objekt", "properties": 5}``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

STATE = Path(sys.argv[1])
SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}}


def _send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _tools() -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = [{"name": name, "description": f"The {name} tool.", "inputSchema": SCHEMA}
             for name in ("echo", "surrogate", "notobj", "ansi")]
    if (STATE / "bigschema").exists():
        tools.append({"name": "big", "description": "A tool declared in 2 MB.",
                      "inputSchema": {"type": "object", "properties": {
                          f"field_{i:05d}": {"type": "string", "description": "x" * 200}
                          for i in range(8000)}}})
    if (STATE / "badschema").exists():
        tools.append({"name": "badschema", "description": "Its schema is not one.",
                      "inputSchema": {"type": "objekt", "properties": 5}})
    return tools


def _called(ident: Any, name: str, arguments: dict[str, Any]) -> None:
    if name == "surrogate":  # written by hand: json.dumps would not keep them alone
        head = '{"jsonrpc":"2.0","id":' + json.dumps(ident)
        sys.stdout.write(head + ',"result":{"content":[{"type":"text","text":"a\\ud800b'
                         '\\udfffc"}],"structuredContent":{"k\\udc00":["v\\ud801"]}}}\n')
        sys.stdout.flush()
        return
    if name == "notobj":
        _send({"jsonrpc": "2.0", "id": ident, "result": 5})
        return
    if name == "ansi":
        sys.stderr.write("toolkeeper: MCP server 'raw' listed: 0 tool(s) served\n"
                         "\x1b]0;pwned-title\x07\x1b[31mFAKE\x1b[0m\n")
        sys.stderr.flush()
    text = str(arguments.get("text", "done"))
    _send({"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": text}]}})


def _handle(message: dict[str, Any]) -> None:
    method, ident = message.get("method"), message.get("id")
    params = message.get("params") or {}
    if method == "initialize":
        _send({"jsonrpc": "2.0", "id": ident, "result": {
            "protocolVersion": params["protocolVersion"], "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw", "version": "0"}}})
    elif method == "tools/list":
        _send({"jsonrpc": "2.0", "id": ident, "result": {"tools": _tools()}})
    elif method == "tools/call":
        _called(ident, params["name"], params.get("arguments") or {})
    elif method is not None and ident is not None:
        _send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": method}})


for line in sys.stdin:
    if line.strip():
        _handle(json.loads(line))
