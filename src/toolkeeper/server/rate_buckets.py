"""The rate limit's buckets in the store, for the processes that share it: the workers of
``toolkeeper serve --workers N`` (one SQLite file) or replicas on one PostgreSQL database.

A client's connections may land on any worker (the kernel spreads them), so a bucket kept in
one process's memory would let a client send N times its limit. Here each request is one
statement — an upsert that refills the bucket for the time since it was last counted, takes a
token if there is one and says whether it did — so two processes counting the same client at
once are serialized by the database, never both admitted on the last token.
"""

from __future__ import annotations

import time
from pathlib import Path

from ..approval.pg import PgDatabase, open_database
from ..approval.sqlite import Database

__all__ = ["SharedBuckets"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS rate_buckets (
    caller TEXT PRIMARY KEY,
    tokens REAL NOT NULL,
    counted_at REAL NOT NULL,
    admitted INTEGER NOT NULL
);
"""
# The bucket refilled for the time since it was counted (never above the burst, never for a
# clock that went back), then a token taken if one is there.
_FILLED = ("CASE WHEN rate_buckets.tokens + ? * (CASE WHEN excluded.counted_at > "
           "rate_buckets.counted_at THEN excluded.counted_at - rate_buckets.counted_at ELSE 0 "
           "END) > ? THEN ? ELSE rate_buckets.tokens + ? * (CASE WHEN excluded.counted_at > "
           "rate_buckets.counted_at THEN excluded.counted_at - rate_buckets.counted_at ELSE 0 "
           "END) END")
_ADMIT = (
    "INSERT INTO rate_buckets (caller, tokens, counted_at, admitted) VALUES (?, ?, ?, 1) "
    "ON CONFLICT (caller) DO UPDATE SET "
    f"tokens = CASE WHEN {_FILLED} >= 1 THEN {_FILLED} - 1 ELSE {_FILLED} END, "
    "counted_at = CASE WHEN excluded.counted_at > rate_buckets.counted_at "
    "THEN excluded.counted_at ELSE rate_buckets.counted_at END, "
    f"admitted = CASE WHEN {_FILLED} >= 1 THEN 1 ELSE 0 END "
    "RETURNING admitted")
SWEEP_EVERY = 1000
"""Requests counted between two sweeps of the buckets that have refilled."""


class SharedBuckets:
    """Token buckets of ``rate`` per second (room for ``burst``) per caller, in the store."""

    def __init__(self, db: str | Path | Database, *, rate: float, burst: int) -> None:
        self.db = open_database(db, _SCHEMA, "rate_buckets")
        self.rate, self.burst = rate, burst
        self._counted = 0

    def admit(self, caller: str) -> bool:
        """Take a token from ``caller``'s bucket: whether there was one. A store write: run it
        off the event loop."""
        filled = (self.rate, self.burst, self.burst, self.rate)
        params = (caller, float(self.burst) - 1.0, time.time(), *filled, *filled, *filled,
                  *filled)
        if isinstance(self.db, PgDatabase):  # one statement is its own transaction: one trip
            rows = self.db.query(_ADMIT, params)
            row = rows[0] if rows else None
        else:
            with self.db.transaction() as conn:
                row = conn.execute(_ADMIT, params).fetchone()
        self._counted += 1
        if self._counted % SWEEP_EVERY == 0:
            self.sweep()
        return bool(row is not None and row[0])

    def sweep(self) -> None:
        """Forget the buckets that have refilled (a caller gone quiet): forgetting one changes
        nothing for its caller."""
        full_s = self.burst / self.rate
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM rate_buckets WHERE counted_at < ?", (time.time() - full_s,))
