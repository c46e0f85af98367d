"""The rate limit's buckets in the store, for the processes that share it: the workers of
``toolkeeper serve --workers N`` (one SQLite file) or replicas on one PostgreSQL database.

A client's connections may land on any worker (the kernel spreads them), so a bucket kept in
one process's memory would let a client send N times its limit. Here a worker takes tokens
from the client's bucket in the store — one statement, an upsert that refills the bucket for
the time since it was last counted, takes up to a batch of tokens and says how many it took —
so two processes counting the same client at once are serialized by the database, never both
given the last token.

A worker spends a batch in memory (``Leases``): one store write per batch of a client's
requests instead of one per request. Tokens in a worker's hand are not in the bucket, so the
bucket in the store holds at most ``burst`` less what every worker may hold (``held``): the
tokens in hand and in the store together never exceed the burst, and a client is never
admitted more than ``burst + rate * T`` over any T seconds. Tokens not spent within a short
lease lapse (dropped, not given back): the limit may refuse a little early, never late.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.to_thread

from ..approval.pg import PgDatabase, open_database
from ..approval.sqlite import Database

__all__ = ["Leases", "SharedBuckets", "batch_for", "shared_rate"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS rate_buckets (
    caller TEXT PRIMARY KEY,
    tokens REAL NOT NULL,
    counted_at REAL NOT NULL,
    admitted INTEGER NOT NULL
);
"""
# The bucket refilled for the time since it was counted (never above its room, never for a
# clock that went back). Parameters: rate, room, room, rate.
_FILLED = ("CASE WHEN rate_buckets.tokens + ? * (CASE WHEN excluded.counted_at > "
           "rate_buckets.counted_at THEN excluded.counted_at - rate_buckets.counted_at ELSE 0 "
           "END) > ? THEN ? ELSE rate_buckets.tokens + ? * (CASE WHEN excluded.counted_at > "
           "rate_buckets.counted_at THEN excluded.counted_at - rate_buckets.counted_at ELSE 0 "
           "END) END")
# The tokens taken from it: as many as asked when there are, else its whole tokens (0 below
# one). Parameters: the filled bucket's, want, want, the filled bucket's.
_TOOK = "CASE WHEN {filled} >= ? THEN ? ELSE {whole} END"
_WHOLE = {"sqlite": "CAST({filled} AS INTEGER)", "pg": "FLOOR({filled})"}
_TAKE = (
    "INSERT INTO rate_buckets (caller, tokens, counted_at, admitted) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (caller) DO UPDATE SET tokens = {filled} - ({took}), "
    "counted_at = CASE WHEN excluded.counted_at > rate_buckets.counted_at "
    "THEN excluded.counted_at ELSE rate_buckets.counted_at END, admitted = {took} "
    "RETURNING admitted")
SWEEP_EVERY = 1000
"""Store writes between two sweeps of the buckets that have refilled."""
MAX_BATCH = 16
"""The most tokens a worker takes from the store at once."""
MAX_HELD = 10_000
"""Callers whose tokens a worker holds before it forgets those whose lease has lapsed."""


def _take_sql(dialect: str) -> str:
    whole = _WHOLE[dialect].format(filled=_FILLED)
    took = _TOOK.format(filled=_FILLED, whole=whole)
    return _TAKE.format(filled=_FILLED, took=took)


_TAKE_SQL = {dialect: _take_sql(dialect) for dialect in _WHOLE}


def batch_for(burst: int, workers: int) -> int:
    """The tokens a worker takes at once: at most a quarter of the burst between all the
    workers' hands (so a client's burst never sits in one worker's), 1 to ``MAX_BATCH``."""
    return max(1, min(MAX_BATCH, burst // (4 * max(1, workers))))


class SharedBuckets:
    """Token buckets of ``rate`` per second (room for ``burst`` less ``held``, the tokens the
    processes sharing them may hold in hand) per caller, in the store."""

    def __init__(self, db: str | Path | Database, *, rate: float, burst: int,
                 held: int = 0) -> None:
        self.db = open_database(db, _SCHEMA, "rate_buckets")
        self.rate, self.burst = rate, burst
        self.reserve(held)
        self._sql = _TAKE_SQL["pg" if isinstance(self.db, PgDatabase) else "sqlite"]
        self._counted = 0

    def reserve(self, held: int) -> None:
        """Keep ``held`` tokens out of each bucket: the most the processes sharing them may
        hold in hand, so that hand and bucket together never exceed the burst."""
        self.room = max(1, self.burst - held)

    def take(self, caller: str, want: int = 1) -> int:
        """Take up to ``want`` tokens from ``caller``'s bucket: how many it took (0: none
        there). One store write: run it off the event loop."""
        room = float(self.room)
        filled = (self.rate, room, room, self.rate)
        took = (*filled, want, want, *filled)
        first = min(want, self.room)
        params = (caller, room - first, time.time(), first, *filled, *took, *took)
        if isinstance(self.db, PgDatabase):  # one statement is its own transaction: one trip
            rows = self.db.query(self._sql, params)
            row = rows[0] if rows else None
        else:
            with self.db.transaction() as conn:
                row = conn.execute(self._sql, params).fetchone()
        self._counted += 1
        if self._counted % SWEEP_EVERY == 0:
            self.sweep()
        return int(row[0]) if row is not None and row[0] else 0  # type: ignore[call-overload]

    def admit(self, caller: str) -> bool:
        """Take one token from ``caller``'s bucket: whether there was one. A store write."""
        return self.take(caller, 1) > 0

    def sweep(self) -> None:
        """Forget the buckets that have refilled (a caller gone quiet): forgetting one changes
        nothing for its caller."""
        full_s = self.room / self.rate
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM rate_buckets WHERE counted_at < ?", (time.time() - full_s,))


@dataclass
class _Taking:
    """A take from the store under way for a caller: the requests that come meanwhile wait
    for it rather than each writing the store."""

    done: anyio.Event = field(default_factory=anyio.Event)
    took: int | None = None
    """The tokens it took; ``None`` while under way, or when the store failed it."""


class Leases:
    """One process's hand of tokens taken from ``buckets``: a caller's request spends one in
    memory while its lease holds; when none is left, one store write takes up to ``batch``
    more (off the event loop). Tokens not spent within ``lease_s`` lapse."""

    def __init__(self, buckets: SharedBuckets, *, batch: int) -> None:
        self.buckets, self.batch = buckets, max(1, batch)
        self.lease_s = min(1.0, max(0.1, self.batch / buckets.rate))
        self._held: dict[str, tuple[int, float]] = {}
        """caller → (tokens in hand, when they lapse)."""
        self._taking: dict[str, _Taking] = {}

    async def admit(self, caller: str) -> bool:
        """Whether ``caller``'s request is within its limit: a token from this process's hand,
        else from the store."""
        if self.batch == 1:  # nothing to hold: each request its own store write, at once
            return await anyio.to_thread.run_sync(self.buckets.take, caller, 1) > 0
        while not self._spend(caller):
            taking = self._taking.get(caller)
            if taking is None:
                return await self._take(caller)
            await taking.done.wait()
            if taking.took == 0:  # the bucket was empty a moment ago: refused with it
                return False  # (a take the store failed: this request tries its own)
        return True

    def _spend(self, caller: str) -> bool:
        held = self._held.get(caller)
        if held is None:
            return False
        left, lapses = held
        if time.monotonic() >= lapses:
            del self._held[caller]
            return False
        if left <= 1:
            del self._held[caller]
        else:
            self._held[caller] = (left - 1, lapses)
        return True

    async def _take(self, caller: str) -> bool:
        taking = self._taking[caller] = _Taking()
        try:
            took = await anyio.to_thread.run_sync(self.buckets.take, caller, self.batch)
            if took > 1:  # one spent now, the rest in hand
                if len(self._held) >= MAX_HELD:
                    self._forget_lapsed()
                self._held[caller] = (took - 1, time.monotonic() + self.lease_s)
            taking.took = took
            return took > 0
        finally:
            del self._taking[caller]
            taking.done.set()

    def _forget_lapsed(self) -> None:
        now = time.monotonic()
        self._held = {k: v for k, v in self._held.items() if v[1] > now}


def shared_rate(db: str | Path | Database, *, rate: float, burst: int,
                workers: int) -> Leases:
    """The rate limit counted in the store for the ``workers`` processes of one server that
    share it. On PostgreSQL, where replicas the server cannot count share the store too, each
    request is its own store write (a batch needs to know every hand it may sit in)."""
    buckets = SharedBuckets(db, rate=rate, burst=burst)
    if isinstance(buckets.db, PgDatabase):
        return Leases(buckets, batch=1)
    batch = batch_for(burst, workers)
    buckets.reserve(workers * (batch - 1))
    return Leases(buckets, batch=batch)
