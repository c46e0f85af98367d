"""What was sent, beside the approvals: one claim per message, so that of several replicas
reading the same change log exactly one sends it, and a log of the sends that failed (and,
at most once a minute per channel, of one that went out), which the page's line about the last
failure reads: it ends once the channel works again, whichever replica sent.

A claim is one ``INSERT … ON CONFLICT DO NOTHING``: the replica whose row went in sends; the
claims of one reading of the change log go in one transaction. A replica that dies between its
claim and its send loses that message (it is not sent twice).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..approval.pg import PgDatabase, open_database
from ..approval.sqlite import Database, number
from ..errors import StoreError

__all__ = ["KEEP_S", "Claim", "Failure", "NotifyLedger", "last_failure"]

KEEP_S = 30 * 24 * 3600.0
"""How long claims and the log are kept."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS notify_claims (
    request_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    target TEXT NOT NULL,
    claimed_at REAL NOT NULL,
    PRIMARY KEY (request_id, kind, target)
);
CREATE TABLE IF NOT EXISTS notify_log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    channel TEXT NOT NULL,
    outcome TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    error TEXT,
    ts REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS notify_log_channel ON notify_log(channel, seq);
"""


_CLAIM = ("INSERT INTO notify_claims (request_id, kind, target, claimed_at) VALUES "
          "(?, ?, ?, ?) ON CONFLICT DO NOTHING")
_CLAIM_AFTER = ("INSERT INTO notify_claims (request_id, kind, target, claimed_at) SELECT ?, ?, "
                "?, ? WHERE EXISTS (SELECT 1 FROM notify_claims WHERE request_id = ? AND "
                "kind = ? AND target = ?) ON CONFLICT DO NOTHING")


@dataclass(frozen=True)
class Claim:
    """One message: ``kind`` about ``request_id`` to ``target`` (a digest of the channel's
    URL), sent only where ``after`` was (when given)."""

    request_id: str
    kind: str
    target: str
    after: str | None = None


@dataclass(frozen=True, kw_only=True)
class Failure:
    """The last send to a channel, when it failed."""

    channel: str
    error: str
    attempts: int
    ts: float


class NotifyLedger:
    """Claims and the send log in one store's database (a SQLite file or PostgreSQL)."""

    def __init__(self, db: str | Path | Database) -> None:
        self.db = open_database(db, _SCHEMA, "notify")

    def claim(self, wanted: Sequence[Claim]) -> list[bool]:
        """For each claim, whether this process sends it — ``True`` once, for the first to
        ask; one with ``after`` only if that kind of message to the same target was claimed
        (an expiry is said only where the request was told). One transaction."""
        now, won = time.time(), []
        with self.db.transaction() as conn:
            for claim in wanted:
                if claim.after is None:
                    cursor = conn.execute(_CLAIM, (claim.request_id, claim.kind, claim.target,
                                                   now))
                else:
                    cursor = conn.execute(_CLAIM_AFTER, (
                        claim.request_id, claim.kind, claim.target, now, claim.request_id,
                        claim.after, claim.target))
                won.append(cursor.rowcount == 1)
        return won

    def record(self, request_id: str, kind: str, channel: str, outcome: str, attempts: int,
               error: str | None = None) -> None:
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO notify_log (request_id, kind, channel, outcome, attempts, "
                         "error, ts) VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (request_id, kind, channel, outcome, attempts, error, time.time()))

    def sweep(self, now: float | None = None) -> None:
        """Forget claims and log rows older than ``KEEP_S``."""
        before = (time.time() if now is None else now) - KEEP_S
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM notify_claims WHERE claimed_at < ?", (before,))
            conn.execute("DELETE FROM notify_log WHERE ts < ?", (before,))


_LAST = ("SELECT channel, outcome, error, attempts, ts FROM notify_log WHERE seq IN "
         "(SELECT MAX(seq) FROM notify_log GROUP BY channel)")


def last_failure(db: Database) -> Failure | None:
    """The newest failure among the channels whose last send failed (``None``: every
    channel's last send went out, or nothing was sent here)."""
    if not _has_log(db):
        return None
    failures = [Failure(channel=str(channel), error=str(error or ""), attempts=int(str(n)),
                        ts=number(ts))
                for channel, outcome, error, n, ts in db.query(_LAST) if outcome == "failed"]
    return max(failures, key=lambda f: f.ts, default=None)


def _has_log(db: Database) -> bool:
    """Whether this database has a send log (a server that never notified has none)."""
    query = ("SELECT to_regclass('notify_log') IS NOT NULL" if isinstance(db, PgDatabase) else
             "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'notify_log'")
    try:
        return bool(db.query(query)[0][0])
    except StoreError:
        return False
