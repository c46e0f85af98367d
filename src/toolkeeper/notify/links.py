"""Single-use decision links (``direct_decisions = true``): a button in a notification that
approves or denies one request.

A link is a random 256-bit token, bound to one request, its arguments' digest, one choice and
the channel it was sent to (the decision's approver: ``notify:ntfy``). Only the token's SHA-256
digest is stored (beside the approvals, so every replica knows it), and a presented token is
compared with the stored digest in constant time. A link works once, and only while its request
is pending: it expires with the request, and any decision (through this link, another one, the
page) ends every link of the request. Opening a link (GET) never decides — mail scanners and
link previews open links — it shows a page whose one button (a POST) does.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..approval.models import ApprovalRequest
from ..approval.pg import open_database
from ..approval.sqlite import Database, number, text_or_none

__all__ = ["KEEP_USED_S", "DecisionLinks", "Link"]

KEEP_USED_S = 7 * 24 * 3600.0
"""How long a used or expired link is kept (to say "already used" rather than "unknown")."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS notify_links (
    digest TEXT PRIMARY KEY,
    request_id TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    choice TEXT NOT NULL,
    channel TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL,
    used_at REAL
);
CREATE INDEX IF NOT EXISTS notify_links_request ON notify_links(request_id);
"""

Choice = Literal["approve", "deny"]


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True, kw_only=True)
class Link:
    """What a token stands for."""

    request_id: str
    args_digest: str
    choice: Choice
    channel: str
    expires_at: float | None
    used_at: float | None

    @property
    def approver(self) -> str:
        """Who decides through it, for the store and the audit log: the channel."""
        return f"notify:{self.channel}"

    def live(self, now: float | None = None) -> bool:
        now = time.time() if now is None else now
        return self.used_at is None and (self.expires_at is None or self.expires_at > now)


class DecisionLinks:
    """The links of one store's database (a SQLite file or PostgreSQL)."""

    def __init__(self, db: str | Path | Database) -> None:
        self.db = open_database(db, _SCHEMA, "notify_links")

    def issue(self, request: ApprovalRequest, choice: Choice, channel: str) -> str:
        """A new token deciding ``choice`` for ``request``, sent through ``channel``."""
        token = secrets.token_urlsafe(32)
        now = time.time()
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO notify_links (digest, request_id, args_digest, choice, channel, "
                "created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (_digest(token), request.id, request.args_digest, choice, channel, now,
                 request.expires_at))
        return token

    def find(self, token: str) -> Link | None:
        """The link of ``token`` (used or not), or ``None`` for a token never issued."""
        if not 20 <= len(token) <= 100:
            return None
        digest = _digest(token)
        rows = self.db.query("SELECT digest, request_id, args_digest, choice, channel, "
                             "expires_at, used_at FROM notify_links WHERE digest = ?", (digest,))
        if not rows or not hmac.compare_digest(str(rows[0][0]), digest):
            return None
        _, request_id, args_digest, choice, channel, expires_at, used_at = rows[0]
        return Link(request_id=str(request_id), args_digest=str(args_digest),
                    choice="approve" if choice == "approve" else "deny", channel=str(channel),
                    expires_at=None if expires_at is None else number(expires_at),
                    used_at=None if text_or_none(used_at) is None else number(used_at))

    def use(self, token: str) -> Link | None:
        """Spend ``token``, once: its link when this call used it (unused and unexpired until
        now), else ``None``. Every other link of the request is spent with it."""
        link = self.find(token)
        if link is None or not link.live():
            return None
        now = time.time()
        with self.db.transaction() as conn:
            spent = conn.execute(
                "UPDATE notify_links SET used_at = ? WHERE digest = ? AND used_at IS NULL",
                (now, _digest(token)))
            if spent.rowcount != 1:
                return None
            conn.execute("UPDATE notify_links SET used_at = ? WHERE request_id = ? AND "
                         "used_at IS NULL", (now, link.request_id))
        return Link(request_id=link.request_id, args_digest=link.args_digest,
                    choice=link.choice, channel=link.channel, expires_at=link.expires_at,
                    used_at=now)

    def sweep(self, now: float | None = None) -> int:
        """Forget the links used or expired more than ``KEEP_USED_S`` ago; how many."""
        before = (time.time() if now is None else now) - KEEP_USED_S
        with self.db.transaction() as conn:
            cursor = conn.execute("DELETE FROM notify_links WHERE used_at < ? OR "
                                  "(expires_at IS NOT NULL AND expires_at < ?)",
                                  (before, before))
            return int(cursor.rowcount)
