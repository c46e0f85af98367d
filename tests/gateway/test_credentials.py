"""Upstream OAuth tokens in the store: sealed under the operator's key, bound to the upstream,
its URL and what they are, and shared by every server on the store that holds the key."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from mcp.shared.auth import OAuthToken

from toolkeeper.config import MCPServerConfig
from toolkeeper.gateway.credentials import CredentialsUnreadable, UpstreamCredentials

URL = "https://mcp.example.com/mcp"


def _config(url: str = URL, name: str = "up") -> MCPServerConfig:
    return MCPServerConfig(name=name, url=url, oauth={"grant": "authorization_code"})


async def test_a_token_is_sealed_at_rest_and_another_replica_with_the_key_reads_it(
        tmp_path: Path) -> None:
    key, db = os.urandom(32), tmp_path / "toolkeeper.db"
    token = OAuthToken(access_token="secret-access", refresh_token="secret-refresh",
                       expires_in=60)
    await UpstreamCredentials(db, key).storage(_config()).set_tokens(token)
    with sqlite3.connect(db) as raw:
        rows = raw.execute("SELECT server, kind, sealed FROM mcp_upstream_auth").fetchall()
    assert [r[:2] for r in rows] == [("up", "tokens")]
    assert "secret" not in rows[0][2] and b"secret-" not in db.read_bytes()
    replica = UpstreamCredentials(db, key).storage(_config())
    kept, expires_at = await replica.load()
    assert kept is not None and kept.access_token == "secret-access" and expires_at is not None


async def test_a_sealed_value_opens_only_under_its_key_for_its_upstream_and_url(
        tmp_path: Path) -> None:
    key, db = os.urandom(32), tmp_path / "toolkeeper.db"
    await UpstreamCredentials(db, key).storage(_config()).set_tokens(
        OAuthToken(access_token="a"))
    with pytest.raises(CredentialsUnreadable):
        await UpstreamCredentials(db, os.urandom(32)).storage(_config()).get_tokens()
    with pytest.raises(CredentialsUnreadable):  # the config now points elsewhere
        await UpstreamCredentials(db, key).storage(_config("https://evil.example/mcp")
                                                   ).get_tokens()
    with sqlite3.connect(db) as raw:  # moved to another upstream's row
        raw.execute("UPDATE mcp_upstream_auth SET server = 'other'")
    with pytest.raises(CredentialsUnreadable):
        await UpstreamCredentials(db, key).storage(_config(name="other")).get_tokens()


async def test_logout_forgets_an_upstream_s_values(tmp_path: Path) -> None:
    credentials = UpstreamCredentials(tmp_path / "toolkeeper.db", os.urandom(32))
    storage = credentials.storage(_config())
    await storage.set_tokens(OAuthToken(access_token="a"))
    await storage.want_scope("read write")
    assert credentials.kept().keys() == {"up"}
    assert credentials.forget("up") == 2
    assert await storage.get_tokens() is None and credentials.kept() == {}
