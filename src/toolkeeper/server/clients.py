"""One token per client: ``toolkeeper tokens add NAME`` makes one (shown once), ``list`` and
``revoke NAME`` manage them. Only a SHA-256 digest of each token is stored, in the state
database; every session, approval request and audit row of a client carries its name.

``toolkeeper tokens add NAME --operator`` makes a named operator's token instead: a person who
decides approvals (the page, the API), never a client — it is refused on ``/mcp`` like the
operator token, and the page and the audit name the person (``operator:NAME``)."""

from __future__ import annotations

import hashlib
import re
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..approval.pg import open_database
from ..core.context import OPERATOR as CORE_OPERATOR
from ..core.context import STDIO_CLIENT, Caller
from ..errors import UsageError

__all__ = ["ANONYMOUS", "DEFAULT_CLIENT", "OPERATOR", "RECHECK_S", "RESERVED", "STDIO",
           "ClientToken", "ClientTokens", "operator_name"]

OPERATOR = CORE_OPERATOR
ANONYMOUS = "anonymous"
"""The client an unauthenticated ``/mcp`` request acts as (``--auth none``): every local
process is that client, so nothing is ever approved for it beyond one call."""
STDIO = STDIO_CLIENT
"""The one client of ``toolkeeper serve --stdio`` (the process that launched it)."""
DEFAULT_CLIENT = "default"
"""The client whose token ``toolkeeper serve`` makes on first start for the config it prints."""
RESERVED = frozenset({OPERATOR, ANONYMOUS, STDIO})
RECHECK_S = 0.25
"""How often (seconds, at most) a server reads the store's change number: the longest a
token revoked elsewhere (another process, another replica, the CLI) keeps working here."""
KEPT = 4096
"""Tokens whose owner a server keeps in memory before it forgets them all and reads again."""
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS client_tokens (
    name TEXT PRIMARY KEY,
    digest TEXT NOT NULL UNIQUE,
    created_at REAL NOT NULL,
    revoked_at REAL
);
CREATE TABLE IF NOT EXISTS operator_tokens (
    name TEXT PRIMARY KEY,
    digest TEXT NOT NULL UNIQUE,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS token_changes (
    id INTEGER PRIMARY KEY,
    version INTEGER NOT NULL
);
"""
_CHANGED = ("INSERT INTO token_changes (id, version) VALUES (1, 1) ON CONFLICT (id) DO UPDATE "
            "SET version = token_changes.version + 1")
_OWNER = ("SELECT 'client', name FROM client_tokens WHERE digest = ? AND revoked_at IS NULL "
          "UNION ALL SELECT 'operator', name FROM operator_tokens WHERE digest = ?")


@dataclass(frozen=True, kw_only=True)
class ClientToken:
    """A client's token as listed (never the token itself)."""

    name: str
    created_at: float
    revoked_at: float | None
    operator: bool = False
    """A named operator's token (a person who decides), not a client's."""


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class ClientTokens:
    """The clients' tokens in the state database."""

    def __init__(self, path: str | Path) -> None:
        self._db = open_database(path, _SCHEMA, "client_tokens")
        self._known: dict[str, tuple[str, str]] = {}
        """A token's digest → (``client`` or ``operator``, the name), as last read."""
        self._version: object = None
        self._checked = float("-inf")
        self._lock = threading.Lock()

    def add(self, name: str, *, operator: bool = False) -> str:
        """A new token for ``name`` (returned once; only its digest is kept); with
        ``operator``, a named operator's (a person who decides approvals).

        Raises:
            UsageError: the name is not a plain lower-case name, is reserved (operator,
                anonymous, stdio), or is taken (by a client or an operator).
        """
        what = "an operator" if operator else "a client"
        if not _NAME.fullmatch(name) or name in RESERVED:
            raise UsageError(f"{name!r} is not {what} name: use lower-case letters, digits, "
                             f"'-' and '_' (and none of {', '.join(sorted(RESERVED))})")
        token = ("tko_" if operator else "tkc_") + secrets.token_urlsafe(32)
        with self._db.transaction() as conn:
            for table in ("client_tokens", "operator_tokens"):
                if conn.execute(f"SELECT 1 FROM {table} WHERE name = ?", (name,)).fetchone():
                    raise UsageError(f"{name!r} already has a token; revoke it first")
            if operator:
                conn.execute("INSERT INTO operator_tokens VALUES (?, ?, ?)",
                             (name, _digest(token), time.time()))
            else:
                conn.execute("INSERT INTO client_tokens VALUES (?, ?, ?, NULL)",
                             (name, _digest(token), time.time()))
            conn.execute(_CHANGED)
        self._forget()
        return token

    def revoke(self, name: str) -> bool:
        """Revoke ``name``'s token (the name can then get a new one); ``False`` if none."""
        with self._db.transaction() as conn:
            found = conn.execute("SELECT 1 FROM client_tokens WHERE name = ? AND revoked_at "
                                 "IS NULL", (name,)).fetchone()
            conn.execute("DELETE FROM client_tokens WHERE name = ?", (name,))
            person = conn.execute("DELETE FROM operator_tokens WHERE name = ?", (name,))
            conn.execute(_CHANGED)
        self._forget()
        return found is not None or person.rowcount == 1

    def list(self) -> list[ClientToken]:
        rows = self._db.query("SELECT name, created_at, revoked_at FROM client_tokens "
                              "ORDER BY name")
        return [ClientToken(name=str(n), created_at=float(str(c)),
                            revoked_at=None if r is None else float(str(r)))
                for n, c, r in rows] + [
            ClientToken(name=str(n), created_at=float(str(c)), revoked_at=None, operator=True)
            for n, c in self._db.query("SELECT name, created_at FROM operator_tokens ORDER BY "
                                       "name")]

    def client_for(self, token: str) -> str | None:
        """The client a presented token belongs to, or ``None``."""
        kind, name = self.owner(token)
        return name if kind == "client" else None

    def is_operator(self, name: str) -> bool:
        """Whether ``name`` is a named operator (their token not revoked)."""
        return bool(self._db.query("SELECT 1 FROM operator_tokens WHERE name = ?", (name,)))

    def operator_for(self, token: str) -> str | None:
        """The named operator a presented token belongs to, or ``None``."""
        kind, name = self.owner(token)
        return name if kind == "operator" else None

    def owner(self, token: str) -> tuple[str, str | None]:
        """Whose a presented token is: (``client`` or ``operator``, the name), or
        (``""``, ``None``) — one read of the store at most, none for a token seen since the
        last change."""
        digest = _digest(token)
        version = self._recheck()
        known = self._known.get(digest)
        if known is not None:
            return known
        rows = self._db.query(_OWNER, (digest, digest))
        if not rows:
            return "", None  # not kept: a token unknown now may be added later
        found = (str(rows[0][0]), str(rows[0][1]))
        with self._lock:
            if self._version == version:  # no change read meanwhile: still true
                if len(self._known) >= KEPT:
                    self._known.clear()
                self._known[digest] = found
        return found

    def _recheck(self) -> object:
        """The change number last read, read again when ``RECHECK_S`` has passed; a new one
        forgets every owner kept."""
        now = time.monotonic()
        if now - self._checked < RECHECK_S:
            return self._version
        rows = self._db.query("SELECT version FROM token_changes WHERE id = 1")
        version = rows[0][0] if rows else 0
        with self._lock:
            if version != self._version:
                self._known.clear()
                self._version = version
            self._checked = now
        return version

    def _forget(self) -> None:
        """After a change made here: read the change number on the next lookup."""
        with self._lock:
            self._known.clear()
            self._version = None
            self._checked = float("-inf")


def operator_name(caller: Caller) -> str:
    """The person behind an operator's credential: a named operator token's name, an OAuth
    access token's ``sub`` (its client id when it names no user), else ``operator`` (the
    operator token of the state dir, the page's login)."""
    subject = caller.subject
    if subject.startswith("oauth:"):
        parts = subject.split(":", 2)
        return parts[2] if len(parts) == 3 and parts[2] else parts[1]
    return subject or OPERATOR
