"""The operator token: from ``TOOLKEEPER_TOKEN``, else generated once (256 bits) and kept in the
state directory, readable by its owner only."""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

from ..approval.pg import open_database
from ..errors import ConfigError

__all__ = ["check_shared_token", "operator_token"]

TOKEN_FILE = "token"


def operator_token(state_dir: Path) -> tuple[str, str]:
    """(the token, where it came from: ``env``, ``stored`` or ``new``). ``TOOLKEEPER_TOKEN``
    wins over the stored one."""
    given = os.environ.get("TOOLKEEPER_TOKEN", "").strip()
    if given:
        return given, "env"
    path = state_dir / TOKEN_FILE
    try:
        stored = path.read_text().strip()
    except FileNotFoundError:
        stored = ""
    if stored:
        return stored, "stored"
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(token + "\n")
    return token, "new"


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
