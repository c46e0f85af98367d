"""Pinned fingerprints of remote tools: the defence against an MCP server that swaps a tool's
description or schema after it was trusted ("rug pull").

A tool's fingerprint is the SHA-256 of the canonical JSON of what the model reads and what the
call must fit: name, title, description, input and output schema, annotations. The first trusted
fingerprint is pinned; a tool seen later with another one is disabled, and what was seen is kept
so an operator can review it and trust it (``toolkeeper tools trust NAME``). An upstream's
prompts and resource templates are pinned the same way (``prompt:NAME``, ``template:NAME``):
one that changed is held until trusted.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..approval.pg import open_database

__all__ = ["PREFIXES", "Kind", "Pin", "SqlitePins", "fingerprint"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS mcp_pins (
    tool TEXT PRIMARY KEY,
    server TEXT NOT NULL,
    fingerprint TEXT,
    declaration TEXT,
    seen_fingerprint TEXT NOT NULL,
    seen_declaration TEXT NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS mcp_servers (
    server TEXT PRIMARY KEY,
    runs TEXT NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS mcp_held (
    tool TEXT PRIMARY KEY,
    server TEXT NOT NULL,
    reason TEXT NOT NULL,
    updated_at REAL NOT NULL
);
"""

Kind = Literal["tool", "prompt", "template"]
_FINGERPRINTED: dict[str, tuple[str, ...]] = {
    "tool": ("name", "title", "description", "inputSchema", "outputSchema", "annotations"),
    "prompt": ("name", "title", "description", "arguments"),
    "template": ("name", "title", "description", "uriTemplate", "mimeType", "annotations"),
}
PREFIXES = {"prompt": "prompt:", "template": "template:"}
"""A prompt's or a resource template's pin is kept under ``prompt:NAME`` / ``template:NAME``
(a tool's under its name), so ``toolkeeper tools trust prompt:up-greet`` trusts a prompt."""


def fingerprint(declaration: dict[str, Any], kind: Kind = "tool") -> str:
    """SHA-256 over the parts of a remote tool's (prompt's, template's) declaration that
    matter: what a model or a person reads, and what a call must fit."""
    parts = {key: declaration.get(key) for key in _FINGERPRINTED[kind]}
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True, kw_only=True)
class Pin:
    """Where one remote tool stands: trusted as pinned, changed since, or never trusted."""

    tool: str
    server: str
    fingerprint: str | None
    declaration: dict[str, Any] | None
    seen_fingerprint: str
    seen_declaration: dict[str, Any]
    held: str | None = None
    """Why the gateway does not serve it whatever its trust (its wire name collides, it would
    shadow a local tool), or None."""

    @property
    def kind(self) -> Kind:
        for kind, prefix in PREFIXES.items():
            if self.tool.startswith(prefix):
                return kind  # type: ignore[return-value]
        return "tool"

    @property
    def state(self) -> Literal["trusted", "changed", "untrusted"]:
        if self.fingerprint is None:
            return "untrusted"
        return "trusted" if self.fingerprint == self.seen_fingerprint else "changed"


class SqlitePins:
    """Pins in the server's SQLite file (the table ``mcp_pins``)."""

    def __init__(self, path: str | Path) -> None:
        self.db = open_database(path, _SCHEMA, "mcp_pins")

    def get(self, tool: str) -> Pin | None:
        rows = self.db.query(_SELECT + " WHERE p.tool = ?", (tool,))
        return _pin(rows[0]) if rows else None

    def all(self, server: str | None = None) -> list[Pin]:
        rows = (self.db.query(_SELECT + " WHERE p.server = ? ORDER BY p.tool", (server,))
                if server else self.db.query(_SELECT + " ORDER BY p.tool"))
        return [_pin(row) for row in rows]

    def hold(self, server: str, held: dict[str, str]) -> None:
        """Record which of ``server``'s tools the gateway refuses to serve, and why (``held``:
        name → reason); every other tool of it is no longer held."""
        current = {pin.tool: pin.held for pin in self.all(server) if pin.held is not None}
        if current == held:
            return
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM mcp_held WHERE server = ?", (server,))
            for tool, reason in held.items():
                conn.execute("INSERT INTO mcp_held (tool, server, reason, updated_at) VALUES "
                             "(?, ?, ?, ?) ON CONFLICT(tool) DO UPDATE SET server = "
                             "excluded.server, reason = excluded.reason, updated_at = "
                             "excluded.updated_at", (tool, server, reason, time.time()))

    def see(self, tool: str, server: str, declaration: dict[str, Any], *, trust: bool,
            kind: Kind = "tool") -> Pin:
        """Record what ``server`` now declares for ``tool`` (a prompt's or template's key,
        ``PREFIXES``); pin it when nothing is pinned yet and ``trust`` (trust on first use).
        Returns where it stands."""
        seen = fingerprint(declaration, kind)
        text = json.dumps(declaration, sort_keys=True)
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO mcp_pins (tool, server, fingerprint, declaration, seen_fingerprint, "
                "seen_declaration, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(tool) DO UPDATE SET seen_fingerprint = excluded.seen_fingerprint, "
                "seen_declaration = excluded.seen_declaration, updated_at = excluded.updated_at",
                (tool, server, seen if trust else None, text if trust else None, seen, text,
                 time.time()))
        pin = self.get(tool)
        assert pin is not None
        return pin

    def runs(self, server: str, how: str) -> None:
        """Record how the gateway runs ``server`` now (sandboxed and with what, unconfined,
        remote), for ``toolkeeper tools pins``."""
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO mcp_servers (server, runs, updated_at) VALUES (?, ?, ?) "
                         "ON CONFLICT(server) DO UPDATE SET runs = excluded.runs, "
                         "updated_at = excluded.updated_at", (server, how, time.time()))

    def servers(self) -> dict[str, str]:
        """Each server the gateway last ran → how it ran it."""
        return {str(server): str(how) for server, how in
                self.db.query("SELECT server, runs FROM mcp_servers ORDER BY server")}

    def trust(self, tool: str) -> Pin | None:
        """Pin what was last seen for ``tool`` (after an operator reviewed it)."""
        with self.db.transaction() as conn:
            conn.execute("UPDATE mcp_pins SET fingerprint = seen_fingerprint, declaration = "
                         "seen_declaration, updated_at = ? WHERE tool = ?", (time.time(), tool))
        return self.get(tool)


_SELECT = ("SELECT p.tool, p.server, p.fingerprint, p.declaration, p.seen_fingerprint, "
           "p.seen_declaration, h.reason FROM mcp_pins p LEFT JOIN mcp_held h ON h.tool = p.tool")


def _pin(row: tuple[object, ...]) -> Pin:
    tool, server, pinned, declaration, seen, seen_declaration, held = row
    return Pin(tool=str(tool), server=str(server),
               fingerprint=str(pinned) if pinned is not None else None,
               declaration=json.loads(str(declaration)) if declaration else None,
               seen_fingerprint=str(seen), seen_declaration=json.loads(str(seen_declaration)),
               held=str(held) if held is not None else None)
