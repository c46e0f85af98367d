"""The credentials ``toolkeeper serve`` makes for itself. Two are kept in the state directory
(readable by its owner only, and never inside a tool's reach):

- the operator token (a person's: the page's API and the CLI decide with it), from
  ``TOOLKEEPER_TOKEN`` or generated once (256 bits) into ``token``;
- the default client token (an agent's: ``/mcp`` only), made once into ``client-token`` so the
  client config serve prints at every start carries it.

The third, the key ``requestState`` is sealed under, is kept in the store: 256 random bits made
by the first server on it and read by every replica and worker at start, so a round answered by
one is completed on another. It is no person's credential: a client holds every ``requestState``
it is sent, and one sealed under a key derived from the operator token would let it test guesses
of that token offline.

The fourth, the key the OAuth tokens of upstream MCP servers are sealed under, is the
operator's and never the store's (the store holds the ciphertext): ``TOOLKEEPER_UPSTREAM_KEY``
(32 bytes, base64url) or ``upstream-key`` in the state directory, made once. Replicas on one
store are given the same one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import secrets
from pathlib import Path

from ..approval.pg import open_database
from ..approval.sqlite import Database
from ..errors import ConfigError
from .clients import DEFAULT_CLIENT, ClientTokens

__all__ = ["check_shared_token", "default_client_token", "operator_token", "shared_state_key",
           "upstream_key"]

TOKEN_FILE = "token"
CLIENT_TOKEN_FILE = "client-token"
UPSTREAM_KEY_FILE = "upstream-key"


def _write_secret(path: Path, value: str) -> None:
    """A new file readable by its owner only (never through a planted symlink)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(value + "\n")


def _read_secret(path: Path) -> str:
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return ""


def operator_token(state_dir: Path) -> tuple[str, str]:
    """(the token, where it came from: ``env``, ``stored`` or ``new``). ``TOOLKEEPER_TOKEN``
    wins over the stored one."""
    given = os.environ.get("TOOLKEEPER_TOKEN", "").strip()
    if given:
        return given, "env"
    path = state_dir / TOKEN_FILE
    stored = _read_secret(path)
    if stored:
        return stored, "stored"
    token = secrets.token_urlsafe(32)
    _write_secret(path, token)
    return token, "new"


def default_client_token(state_dir: Path, clients: ClientTokens) -> str | None:
    """The default client's token, made on first start (``client-token`` in ``state_dir``);
    ``None`` when the store already has a default client whose token this state dir does not
    hold (another replica made it: give this one its own client with ``tokens add``)."""
    path = state_dir / CLIENT_TOKEN_FILE
    stored = _read_secret(path)
    if stored and clients.client_for(stored) == DEFAULT_CLIENT:
        return stored
    if any(c.name == DEFAULT_CLIENT for c in clients.list()):
        return None
    token = clients.add(DEFAULT_CLIENT)
    path.unlink(missing_ok=True)  # a stale one (its client was revoked)
    _write_secret(path, token)
    return token


_SETTINGS = """
CREATE TABLE IF NOT EXISTS toolkeeper_settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""


def check_shared_token(store: str | Path, token: str) -> None:
    """Replicas on one store must share one operator token (else a page logged in on one is a
    stranger to the next): the first to start records its digest; a replica with another token
    is refused at start."""
    digest = hashlib.sha256(token.encode("utf-8")).hexdigest()
    db = open_database(store, _SETTINGS, "settings")
    with db.transaction() as conn:
        conn.execute("INSERT INTO toolkeeper_settings (key, value) VALUES ('operator_token', ?) "
                     "ON CONFLICT (key) DO NOTHING", (digest,))
    (recorded,) = db.query("SELECT value FROM toolkeeper_settings WHERE key = "
                           "'operator_token'")[0]
    if recorded != digest:
        raise ConfigError("this store was set up with another operator token: every replica "
                          "must use the same one (set TOOLKEEPER_TOKEN to the same value "
                          "everywhere)")


def shared_state_key(store: str | Path | Database) -> str:
    """The key ``requestState`` is sealed under, the same for every server on ``store``: made
    (256 random bits) by the first to start, read by the others."""
    db = open_database(store, _SETTINGS, "settings")
    with db.transaction() as conn:
        conn.execute("INSERT INTO toolkeeper_settings (key, value) VALUES "
                     "('request_state_key', ?) ON CONFLICT (key) DO NOTHING",
                     (secrets.token_hex(32),))
    (key,) = db.query("SELECT value FROM toolkeeper_settings WHERE key = "
                      "'request_state_key'")[0]
    return str(key)


def upstream_key(state_dir: Path) -> bytes:
    """The key upstream OAuth tokens are sealed under: ``TOOLKEEPER_UPSTREAM_KEY``, else the
    state dir's ``upstream-key`` (made once, owner-only)."""
    given = os.environ.get("TOOLKEEPER_UPSTREAM_KEY", "").strip()
    where = "TOOLKEEPER_UPSTREAM_KEY"
    if not given:
        path = state_dir / UPSTREAM_KEY_FILE
        given, where = _read_secret(path), str(path)
        if not given:
            given = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
            _write_secret(path, given)
    try:
        key = base64.urlsafe_b64decode(given + "=" * (-len(given) % 4))
    except (binascii.Error, ValueError):
        key = b""
    if len(key) != 32:
        raise ConfigError(f"{where} must hold 32 bytes in base64url (make one with: python -c "
                          "'import secrets, base64; print(base64.urlsafe_b64encode("
                          "secrets.token_bytes(32)).decode())')")
    return key
