"""``ApprovalStore``: pending requests that survive restarts; decisions that apply exactly once."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from ..core.risk import HitlMode
from ..errors import StoreError
from .models import SESSION_GRANT_S, ApprovalDecision, ApprovalRequest, duration
from .pg import CHANNEL, PgDatabase, is_url, open_database
from .sqlite import Connection
from .states import RULES, Operation, State, Transition, decider, sources, stored, transition

__all__ = ["FIGURED", "RULES", "AnnouncesChanges", "ApprovalStore", "FindsOpen", "GrantsSessions",
           "PostgresApprovalStore", "QueueFigures", "Replays", "Settles", "SqliteApprovalStore",
           "State", "StoredApproval"]

DENIAL_HOLDS_S = 600.0
"""How long a denial (or a run whose caller may have given up) answers the same call made
again before it is asked anew."""


def _in(states: tuple[State, ...]) -> str:
    """``state IN (?, …)`` for ``states`` (bound as parameters); never true when empty."""
    return f"state IN ({', '.join('?' * len(states))})" if states else "1 = 0"


_REJOINS: tuple[State, ...] = ("pending", "approved")
"""What the same call made again waits on or takes (``find_open``)."""
_TELLS: tuple[State, ...] = ("denied", "executing", "done")
"""What the same call made again is told about, within ``DENIAL_HOLDS_S``."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS approvals (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    request TEXT NOT NULL,
    state TEXT NOT NULL,
    decision TEXT,
    result TEXT,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS approvals_state ON approvals(state, session_id);
CREATE TABLE IF NOT EXISTS approval_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    state TEXT NOT NULL,
    ts REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS approval_events_request ON approval_events(request_id, state);
UPDATE approvals SET state = 'expired' WHERE state = 'timeout';
"""
# (the last statement: an expired request was stored as 'timeout' before it had its own name;
# the state index makes it cheap at every open, and its decision reads as 'expired')

_EVENT = ("INSERT INTO approval_events (request_id, session_id, state, ts) "
          "SELECT id, session_id, state, ? FROM approvals WHERE id = ?")


FIGURED = 1000
"""How many of the latest decisions the median and p95 time to decision are taken over."""
_DECISION_TIMES = (
    "SELECT d.ts - p.ts FROM approval_events d JOIN approval_events p ON p.request_id = "
    "d.request_id AND p.state = 'pending' WHERE d.state IN ('approved', 'denied', 'skipped') "
    "ORDER BY d.seq DESC LIMIT ?")


@dataclass(frozen=True, kw_only=True)
class QueueFigures:
    """Where the queue stands: requests waiting now, how long the oldest has waited, the median
    and 95th percentile of the time from a request to its decision over the latest
    ``FIGURED`` decisions (``None`` before any), and how many requests expired."""

    waiting: int
    oldest_s: float | None
    median_s: float | None
    p95_s: float | None
    expired: int


def _quantile(ordered: list[float], q: float) -> float | None:
    """The ``q`` quantile of sorted values (nearest rank); ``None`` for none."""
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


@dataclass(frozen=True, kw_only=True)
class StoredApproval:
    """A stored request with where it stands."""

    request: ApprovalRequest
    state: State
    decision: ApprovalDecision | None = None
    result: dict[str, object] | None = None


@runtime_checkable
class ApprovalStore(Protocol):
    """Where approval requests live. ``toolkeeper.testing`` has a conformance suite for it."""

    def create(self, request: ApprovalRequest) -> None: ...
    def get(self, request_id: str) -> StoredApproval | None: ...
    def decide(self, decision: ApprovalDecision) -> bool: ...
    def claim(self, request_id: str) -> bool: ...
    def complete(self, request_id: str, result: Mapping[str, object]) -> None: ...
    def pending(self, session_id: str | None = None) -> list[ApprovalRequest]: ...


@runtime_checkable
class FindsOpen(Protocol):
    """Optional: a store that can find the open request for the same call, so a call retried
    (after a restart, say) takes its approved request instead of asking again."""

    def find_open(self, session_id: str, tool: str, digest: str) -> StoredApproval | None: ...


@runtime_checkable
class GrantsSessions(Protocol):
    """Optional: a store that can find a person's "approve for this client" still holding for
    a session and tool, whichever process asked it: every replica and worker honours it."""

    def session_grant(self, session_id: str, tool: str) -> ApprovalDecision | None: ...


@runtime_checkable
class Replays(Protocol):
    """Optional: a store that can tell, once, what an approved request's run did."""

    def replay(self, request_id: str) -> dict[str, object] | None: ...


@runtime_checkable
class AnnouncesChanges(Protocol):
    """Optional: a store that can wake a waiter when some request changes, in any process
    (PostgreSQL ``NOTIFY``) — when ``announces_changes`` says it does; without it a waiter
    polls."""

    announces_changes: bool

    def wait_for_change(self, timeout: float) -> bool: ...


@runtime_checkable
class Settles(Protocol):
    """Optional: a store that ends, on demand, the pending requests past their time-to-live
    (it must anyway before a person's decision, and before it lists what is pending)."""

    def settle(self, request_id: str | None = None) -> list[str]: ...


class SqliteApprovalStore:
    """Approvals in one SQLite file (WAL), safe across threads and processes.

    ``decide`` applies only to a pending request and is final; ``claim`` moves an approved request
    to ``executing`` for exactly one caller, so a resumed call runs once however many processes
    race to resume it.
    """

    def __init__(self, path: str | Path) -> None:
        self.db = open_database(path, _SCHEMA, "approvals")
        self.announces_changes = isinstance(self.db, PgDatabase)
        """Whether a change is announced to waiters in other processes (PostgreSQL NOTIFY);
        without it a waiter polls."""

    def _changed(self, conn: Connection, now: float, request_id: str) -> None:
        """Record a change for the event stream, in the same transaction. On PostgreSQL the
        events are serialized (so cursors only grow in commit order) and announced."""
        if self.announces_changes:
            conn.execute("SELECT pg_advisory_xact_lock(7262349)")
        conn.execute(_EVENT, (now, request_id))
        if self.announces_changes:
            conn.execute("SELECT pg_notify(?, ?)", (CHANNEL, request_id))

    def wait_for_change(self, timeout: float) -> bool:
        """Block until some request changes (PostgreSQL: a notification from any replica) or
        ``timeout`` passes; on SQLite, just sleep (the caller re-reads either way)."""
        if isinstance(self.db, PgDatabase):
            return self.db.wait_for_notify(timeout)
        time.sleep(timeout)
        return False

    def create(self, request: ApprovalRequest) -> None:
        move = transition("create", "service")
        if move is None:
            raise StoreError("the approval state table has no create")
        now = time.time()
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO approvals (id, session_id, tool, request, state, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (request.id, request.session_id, request.tool, request.model_dump_json(),
                 move.target, now),
            )
            self._changed(conn, now, request.id)

    def get(self, request_id: str) -> StoredApproval | None:
        rows = self.db.query("SELECT request, state, decision, result FROM approvals WHERE id = ?",
                             (request_id,))
        if not rows:
            return None
        request, state, decision, result = rows[0]
        return StoredApproval(
            request=ApprovalRequest.model_validate_json(str(request)),
            state=stored(state),
            decision=ApprovalDecision.model_validate_json(str(decision)) if decision else None,
            result=json.loads(str(result)) if result else None,
        )

    def settle(self, request_id: str | None = None) -> list[str]:
        """End the pending requests (or the one) whose time-to-live has passed, exactly once:
        a CONTINUE_ON_TIMEOUT request is approved (approver ``timeout``), as its mode says;
        any other expires (state ``expired``) and can no longer be approved. Returns the ids
        ended now."""
        now, expiring = time.time(), sources("expire", "rule")
        if request_id is None:
            rows = self.db.query(f"SELECT request FROM approvals WHERE {_in(expiring)}",
                                 expiring)
        else:
            rows = self.db.query(f"SELECT request FROM approvals WHERE {_in(expiring)} AND "
                                 "id = ?", (*expiring, request_id))
        ended = []
        for (raw,) in rows:
            request = ApprovalRequest.model_validate_json(str(raw))
            if request.expires_at is None or request.expires_at > now:
                continue
            if request.hitl_mode is HitlMode.CONTINUE_ON_TIMEOUT:
                decision = ApprovalDecision(
                    request_id=request.id, outcome="approved", approver="timeout",
                    message="approved automatically: nobody answered in time")
            else:
                decision = ApprovalDecision(
                    request_id=request.id, outcome="expired",
                    message=f"nobody decided within {duration(request.expires_at - request.created_at)}")
            if self._apply(decision, "expire"):
                ended.append(request.id)
        return ended

    def decide(self, decision: ApprovalDecision) -> bool:
        """Apply ``decision`` to a pending request; ``False`` when it is no longer pending.
        A person's decision never applies to a request past its time-to-live (it expires
        first); the service's own (a timeout) applies as it is. The state table says which
        decisions exist: one it does not list (a rule's denial, say) changes nothing."""
        if decider(decision.outcome, decision.approver) == "person":
            self.settle(decision.request_id)
        return self._apply(decision, "decide")

    def _apply(self, decision: ApprovalDecision, operation: Operation) -> bool:
        move = transition(operation, decider(decision.outcome, decision.approver),
                          decision.outcome)
        return self._update(move, decision.request_id, decision=decision.model_dump_json())

    def _update(self, move: Transition | None, request_id: str, **columns: str) -> bool:
        """Make ``move`` on ``request_id`` (setting ``columns`` too) if, and only if, the request
        is in one of its source states: one conditional ``UPDATE``, so one caller wins. No
        move (the table has none) changes nothing."""
        if move is None:
            return False
        sets = "".join(f", {column} = ?" for column in columns)
        with self.db.transaction() as conn:
            cursor = conn.execute(
                f"UPDATE approvals SET state = ?{sets}, updated_at = ? "
                f"WHERE id = ? AND {_in(move.sources)}",
                (move.target, *columns.values(), time.time(), request_id, *move.sources))
            if cursor.rowcount == 1:
                self._changed(conn, time.time(), request_id)
            return bool(cursor.rowcount == 1)

    def claim(self, request_id: str) -> bool:
        return self._update(transition("claim", "executor"), request_id)

    def complete(self, request_id: str, result: Mapping[str, object]) -> None:
        self._update(transition("complete", "executor"), request_id,
                     result=json.dumps(result, default=str))

    def pending(self, session_id: str | None = None) -> list[ApprovalRequest]:
        self.settle()
        undecided = sources("decide", "person")  # what a person may still decide
        if session_id is None:
            rows = self.db.query(f"SELECT request FROM approvals WHERE {_in(undecided)} "
                                 "ORDER BY updated_at", undecided)
        else:
            rows = self.db.query(f"SELECT request FROM approvals WHERE {_in(undecided)} AND "
                                 "session_id = ? ORDER BY updated_at", (*undecided, session_id))
        return [ApprovalRequest.model_validate_json(str(r[0])) for r in rows]

    def find_open(self, session_id: str, tool: str, digest: str) -> StoredApproval | None:
        """The newest request of ``session_id`` for ``tool`` with these arguments that is
        still pending, approved and not yet taken, or denied, taken for execution or run
        (once) within ``DENIAL_HOLDS_S`` (so the call made again is told why or what it did,
        instead of asking again — or running twice — at once). Expired requests are settled
        first: one past its time is never taken as pending."""
        self.settle()
        rows = self.db.query(
            f"SELECT id FROM approvals WHERE session_id = ? AND tool = ? AND ({_in(_REJOINS)} "
            f"OR ({_in(_TELLS)} AND updated_at > ?)) ORDER BY updated_at DESC",
            (session_id, tool, *_REJOINS, *_TELLS, time.time() - DENIAL_HOLDS_S))
        for (request_id,) in rows:
            stored = self.get(str(request_id))
            if stored is None or stored.request.args_digest != digest:
                continue
            if stored.state == "done" and (stored.result or {}).get("replayed"):
                continue  # its result was told again once: the same call now asks anew
            return stored
        return None

    def session_grant(self, session_id: str, tool: str) -> ApprovalDecision | None:
        """The newest approval of ``tool`` for this session a person gave "for this client"
        (``scope="session"``) that still holds (decided less than ``SESSION_GRANT_S`` ago),
        or ``None``. A decision moves its row's ``updated_at``, so only rows changed since
        the grant's window opened are read."""
        since = time.time() - SESSION_GRANT_S
        rows = self.db.query(
            "SELECT decision FROM approvals WHERE session_id = ? AND tool = ? AND "
            "updated_at > ? AND decision IS NOT NULL ORDER BY updated_at DESC",
            (session_id, tool, since))
        for (raw,) in rows:
            decision = ApprovalDecision.model_validate_json(str(raw))
            if decision.approved and decision.scope == "session" and decision.decided_at > since:
                return decision
        return None

    def replay(self, request_id: str) -> dict[str, object] | None:
        """The result of a request that ran (``done``), to tell the same call made again —
        once: the call made after that asks anew. ``None`` when it was told already."""
        move, stored = transition("replay", "service"), self.get(request_id)
        if move is None or stored is None or stored.state not in move.sources \
                or stored.result is None or stored.result.get("replayed"):
            return None
        before = json.dumps(stored.result, default=str)
        after = json.dumps({**stored.result, "replayed": True}, default=str)
        with self.db.transaction() as conn:
            cursor = conn.execute(f"UPDATE approvals SET state = ?, result = ? WHERE id = ? AND "
                                  f"{_in(move.sources)} AND result = ?",
                                  (move.target, after, request_id, *move.sources, before))
        return stored.result if cursor.rowcount == 1 else None

    def requests(self, *, state: str | None = None, session_id: str | None = None,
                 limit: int = 200) -> list[StoredApproval]:
        """Requests newest first, optionally in one state and of one session (expired ones are
        settled first: the pending are the ones still approvable)."""
        self.settle()
        clauses, params = [], []
        for column, value in (("state", state), ("session_id", session_id)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self.db.query(f"SELECT id FROM approvals {where} ORDER BY updated_at DESC "
                             "LIMIT ?", (*params, limit))
        found = (self.get(str(r[0])) for r in rows)
        return [stored for stored in found if stored is not None]

    def events(self, after: int, *, session_id: str | None = None, limit: int = 500
               ) -> list[tuple[int, str, str]]:
        """(cursor, request id, new state) of every change after ``after``, oldest first: what a
        live page replays after a reconnect or a restart (``Last-Event-ID``)."""
        if session_id is None:
            rows = self.db.query("SELECT seq, request_id, state FROM approval_events WHERE "
                                 "seq > ? ORDER BY seq LIMIT ?", (after, limit))
        else:
            rows = self.db.query("SELECT seq, request_id, state FROM approval_events WHERE "
                                 "seq > ? AND session_id = ? ORDER BY seq LIMIT ?",
                                 (after, session_id, limit))
        return [(int(str(r[0])), str(r[1]), str(r[2])) for r in rows]

    def figures(self, *, settle: bool = True) -> QueueFigures:
        """The queue's figures now (``QueueFigures``); requests past their time expire first
        (``settle=False``: the caller just settled them)."""
        if settle:
            self.settle()
        counts = {str(r[0]): int(str(r[1])) for r in self.db.query(
            "SELECT state, COUNT(*) FROM approvals WHERE state IN ('pending', 'expired') "
            "GROUP BY state")}
        oldest = self.db.query("SELECT MIN(updated_at) FROM approvals WHERE state = 'pending'")
        times = sorted(max(0.0, float(str(r[0])))
                       for r in self.db.query(_DECISION_TIMES, (FIGURED,)))
        first = oldest[0][0] if oldest else None
        return QueueFigures(
            waiting=counts.get("pending", 0),
            oldest_s=max(0.0, time.time() - float(str(first))) if first is not None else None,
            median_s=_quantile(times, 0.5), p95_s=_quantile(times, 0.95),
            expired=counts.get("expired", 0))

    def last_event(self) -> int:
        """The cursor of the newest change (0 when there is none)."""
        rows = self.db.query("SELECT COALESCE(MAX(seq), 0) FROM approval_events")
        return int(str(rows[0][0]))


class PostgresApprovalStore(SqliteApprovalStore):
    """The same store on PostgreSQL (``postgresql://…``; install ``toolkeeper[postgres]``),
    shared by every replica: a claim is one conditional ``UPDATE`` (the row lock makes exactly
    one replica win), and every change is announced with ``NOTIFY`` so waiting calls on other
    replicas wake at once."""

    def __init__(self, url: str) -> None:
        if not is_url(url):
            raise StoreError(f"PostgresApprovalStore needs a postgresql:// URL, got {url!r}")
        super().__init__(url)
