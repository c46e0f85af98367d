"""The OAuth tokens and client registrations the gateway holds for its upstreams, kept in the
store so every replica and worker on it shares them — sealed, because the store is not the key.

Each value is sealed with AES-256-GCM under a key the operator holds (``TOOLKEEPER_UPSTREAM_KEY``
or the state dir's ``upstream-key``, never the store): a copy of the database, a backup or a
PostgreSQL reader learns no token. The sealed text is bound to the upstream's name, its URL and
what it is (tokens, client, scope), so a value moved to another row, another upstream or a URL
the config now names does not open: a token is only ever sent where it was issued, and a
changed URL asks for a login again.
"""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio

from ..approval.pg import open_database
from ..approval.sqlite import Database
from ..config.model import MCPServerConfig
from ..extras import missing

if TYPE_CHECKING:
    from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

__all__ = ["KEY_BYTES", "CredentialsUnreadable", "StoredTokens", "UpstreamCredentials"]

KEY_BYTES = 32
_SCHEMA = """
CREATE TABLE IF NOT EXISTS mcp_upstream_auth (
    server TEXT NOT NULL,
    kind TEXT NOT NULL,
    sealed TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (server, kind)
);
"""
Kind = Literal["tokens", "client", "scope"]


class CredentialsUnreadable(Exception):
    """What the store holds for an upstream does not open under this key (another replica's
    key, or a key changed since the login)."""


class UpstreamCredentials:
    """The sealed credentials of every upstream in ``store``, opened with ``key``."""

    def __init__(self, store: str | Path | Database, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise ValueError(f"the upstream key must be {KEY_BYTES} bytes, got {len(key)}")
        try:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        except ImportError as exc:
            raise missing("oauth", "OAuth to upstream MCP servers") from exc
        self._aead = AESGCM(key)
        self.db = open_database(store, _SCHEMA, "upstream_auth")

    def storage(self, config: MCPServerConfig, *, fresh: bool = False) -> StoredTokens:
        """The SDK's ``TokenStorage`` for one upstream, backed by this store; ``fresh``: the
        tokens kept are not read (a login asks again), only replaced."""
        return StoredTokens(self, config.name, config.url or "", fresh=fresh)

    def put(self, server: str, url: str, kind: Kind, value: str) -> None:
        nonce = os.urandom(12)
        sealed = nonce + self._aead.encrypt(nonce, value.encode(), _bound(server, url, kind))
        text = base64.b64encode(sealed).decode()
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO mcp_upstream_auth (server, kind, sealed, updated_at) "
                         "VALUES (?, ?, ?, ?) ON CONFLICT (server, kind) DO UPDATE SET "
                         "sealed = excluded.sealed, updated_at = excluded.updated_at",
                         (server, kind, text, time.time()))

    def get(self, server: str, url: str, kind: Kind) -> str | None:
        """The value kept, ``None`` when there is none; ``CredentialsUnreadable`` when it does
        not open (another key, another URL)."""
        rows = self.db.query("SELECT sealed FROM mcp_upstream_auth WHERE server = ? AND "
                             "kind = ?", (server, kind))
        if not rows:
            return None
        from cryptography.exceptions import InvalidTag

        sealed = base64.b64decode(str(rows[0][0]))
        try:
            return self._aead.decrypt(sealed[:12], sealed[12:], _bound(server, url, kind)
                                      ).decode()
        except InvalidTag as exc:
            raise CredentialsUnreadable(server) from exc

    def forget(self, server: str) -> int:
        """Drop everything kept for ``server``; how many values were dropped."""
        with self.db.transaction() as conn:
            return conn.execute("DELETE FROM mcp_upstream_auth WHERE server = ?",
                                (server,)).rowcount

    def kept(self) -> dict[str, float]:
        """Each upstream with tokens kept → when they were last written."""
        rows = self.db.query("SELECT server, updated_at FROM mcp_upstream_auth WHERE kind = "
                             "'tokens' ORDER BY server")
        return {str(server): float(str(at)) for server, at in rows}


def _bound(server: str, url: str, kind: str) -> bytes:
    """What a sealed value is bound to (the AEAD's associated data)."""
    return json.dumps([server, url, kind]).encode()


class StoredTokens:
    """One upstream's tokens and client registration in the store (the SDK's
    ``TokenStorage``). Every read goes to the store, so a token another replica refreshed
    is the one used next."""

    def __init__(self, credentials: UpstreamCredentials, server: str, url: str, *,
                 fresh: bool = False) -> None:
        self.credentials, self.server, self.url = credentials, server, url
        self.fresh = fresh

    async def _get(self, kind: Kind) -> str | None:
        return await anyio.to_thread.run_sync(self.credentials.get, self.server, self.url, kind)

    async def _put(self, kind: Kind, value: str) -> None:
        await anyio.to_thread.run_sync(self.credentials.put, self.server, self.url, kind, value)

    async def get_tokens(self) -> OAuthToken | None:
        return (await self.load())[0]

    async def load(self) -> tuple[OAuthToken | None, float | None]:
        """The tokens kept, and when the access token expires (epoch seconds) if known."""
        from mcp.shared.auth import OAuthToken

        text = None if self.fresh else await self._get("tokens")  # a login's first read
        if not text:
            return None, None
        kept = json.loads(text)
        return OAuthToken.model_validate(kept["token"]), kept.get("expires_at")

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires_at = time.time() + tokens.expires_in if tokens.expires_in else None
        self.fresh = False
        await self._put("tokens", json.dumps({"token": tokens.model_dump(mode="json"),
                                              "expires_at": expires_at}))

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        from mcp.shared.auth import OAuthClientInformationFull

        text = await self._get("client")
        return OAuthClientInformationFull.model_validate_json(text) if text else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        await self._put("client", client_info.model_dump_json())

    async def wanted_scope(self) -> str | None:
        """The scope the upstream last asked for that no token held yet (its step-up)."""
        return await self._get("scope")

    async def want_scope(self, scope: str) -> None:
        await self._put("scope", scope)

    def has_tokens(self) -> bool:
        rows: list[Any] = self.credentials.db.query(
            "SELECT 1 FROM mcp_upstream_auth WHERE server = ? AND kind = 'tokens'",
            (self.server,))
        return bool(rows)
