"""Browser sessions of the approval page.

The server prints a login URL holding a one-time code (128 bits, valid 15 minutes, usable
once). Opening it sets a random session secret as an ``HttpOnly; SameSite=Strict`` cookie and
redirects to the page, so nothing secret stays in the address bar or the history. Only SHA-256
digests of codes and secrets are stored (SQLite, beside the approvals), so a session survives a
restart and works on every replica sharing the store. Forms carry a CSRF token derived from the
session secret (HMAC), checked with the request's ``Origin``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from pathlib import Path

from ..approval.pg import open_database

__all__ = ["COOKIE", "PERSON_PREFIX", "WebSessions"]

COOKIE = "toolkeeper_session"
PERSON_PREFIX = "operator:"
"""A session's client that names a named operator (``operator:alice``): the operator, as
that person."""
LOGIN_TTL_S = 15 * 60
SESSION_TTL_S = 7 * 24 * 3600

_SCHEMA = """
CREATE TABLE IF NOT EXISTS web_logins (
    digest TEXT PRIMARY KEY,
    expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS web_login_people (
    digest TEXT PRIMARY KEY,
    person TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS web_sessions (
    digest TEXT PRIMARY KEY,
    client TEXT NOT NULL,
    expires_at REAL NOT NULL
);
"""


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


class WebSessions:
    """Login codes and browser sessions (the operator's)."""

    def __init__(self, path: str | Path) -> None:
        self.db = open_database(path, _SCHEMA, "web_sessions")

    def login_code(self, person: str = "") -> str:
        """A new one-time login code for the printed URL; with ``person``, the page's session
        is that named operator's (``operator:NAME`` decides)."""
        code = secrets.token_urlsafe(16)
        now = time.time()
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM web_logins WHERE expires_at < ?", (now,))
            conn.execute("DELETE FROM web_login_people WHERE digest NOT IN (SELECT digest "
                         "FROM web_logins)")
            conn.execute("INSERT INTO web_logins (digest, expires_at) VALUES (?, ?)",
                         (_digest(code), now + LOGIN_TTL_S))
            if person:
                conn.execute("INSERT INTO web_login_people (digest, person) VALUES (?, ?)",
                             (_digest(code), person))
        return code

    def redeem(self, code: str, client: str = "operator") -> str | None:
        """A new session secret for a valid, unused code (which is used up); else ``None``."""
        now = time.time()
        with self.db.transaction() as conn:
            cursor = conn.execute("DELETE FROM web_logins WHERE digest = ? AND expires_at >= ?",
                                  (_digest(code), now))
            if cursor.rowcount != 1:
                return None
            person = conn.execute("SELECT person FROM web_login_people WHERE digest = ?",
                                  (_digest(code),)).fetchone()
            if person is not None:
                conn.execute("DELETE FROM web_login_people WHERE digest = ?", (_digest(code),))
                client = f"{PERSON_PREFIX}{person[0]}"
            secret = secrets.token_urlsafe(32)
            conn.execute("INSERT INTO web_sessions (digest, client, expires_at) VALUES (?, ?, ?)",
                         (_digest(secret), client, now + SESSION_TTL_S))
        return secret

    def client_for(self, secret: str) -> str | None:
        if not secret:
            return None
        rows = self.db.query("SELECT client FROM web_sessions WHERE digest = ? AND "
                             "expires_at >= ?", (_digest(secret), time.time()))
        return str(rows[0][0]) if rows else None

    def logout(self, secret: str) -> None:
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM web_sessions WHERE digest = ?", (_digest(secret),))

    @staticmethod
    def csrf(secret: str) -> str:
        """The CSRF token of a session: forms carry it, the server recomputes it."""
        return hmac.new(secret.encode("utf-8"), b"toolkeeper-csrf", hashlib.sha256).hexdigest()

    @classmethod
    def csrf_ok(cls, secret: str, presented: str) -> bool:
        return bool(secret) and hmac.compare_digest(cls.csrf(secret), presented or "")
