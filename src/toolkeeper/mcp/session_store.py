"""What the processes serving one store's MCP sessions (``--sessions``) tell each other through
it: a number of its own for each (``process_number``), which sessions their clients ended
(``DELETE``: the id is then not found on any of them), a client's answers to a server's
request (``ctx.elicit``, ``ctx.sample``, ``ctx.list_roots``) that reached another process
than the one whose call asked, and a client's cancellations of a request another process runs
— each taken once by the process that asked or runs it; and which processes are alive
(``beat``). Sessions are referred to by a digest of their id."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from ..approval.pg import open_database
from ..approval.sqlite import Database

__all__ = ["ANSWER_TTL_S", "BEAT_S", "LOST_AFTER_S", "SessionStore", "beating", "digest"]

logger = logging.getLogger(__name__)

ANSWER_TTL_S = 600.0
"""An answer nobody took in this long (its call ended meanwhile) is dropped."""
BEAT_S = 2.0
"""How often a process serving sessions tells the store it is alive."""
LOST_AFTER_S = 10.0
"""A process silent this long is taken as lost (killed, or cut off from the store)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS mcp_sessions_ended (
    session TEXT PRIMARY KEY,
    ended_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS mcp_sessions_ended_at ON mcp_sessions_ended (ended_at);
CREATE TABLE IF NOT EXISTS mcp_session_answers (
    session TEXT NOT NULL,
    request_id TEXT NOT NULL,
    body TEXT NOT NULL,
    posted_at REAL NOT NULL,
    PRIMARY KEY (session, request_id)
);
CREATE TABLE IF NOT EXISTS mcp_session_processes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at REAL NOT NULL,
    beat_at REAL NOT NULL
);
"""


def digest(session_id: str) -> str:
    """How the store names a session (its id is a credential of sorts: never stored)."""
    return hashlib.sha256(session_id.encode()).hexdigest()


class SessionStore:
    """Ended sessions and answers in transit, in ``target``: the approval store's database (a
    SQLite file or the PostgreSQL database replicas share)."""

    def __init__(self, target: str | Path | Database) -> None:
        self.db = open_database(target, _SCHEMA, "mcp_sessions")

    def process_number(self) -> int:
        """A number no other process serving this store was given (one per start): what
        keeps the ids of the requests each sends its sessions' clients apart, and what it
        says it is alive under (``beat``)."""
        now = time.time()
        with self.db.transaction() as conn:
            row = conn.execute("INSERT INTO mcp_session_processes (started_at, beat_at) "
                               "VALUES (?, ?) RETURNING seq", (now, now)).fetchone()
            conn.execute("DELETE FROM mcp_session_processes WHERE beat_at < ?",
                         (now - 30 * 24 * 3600,))
        if row is None:  # pragma: no cover - RETURNING always answers
            raise RuntimeError("the store numbered no process")
        return int(str(row[0]))

    def beat(self, process: int) -> None:
        """``process`` is alive (it says so every ``BEAT_S``)."""
        with self.db.transaction() as conn:
            conn.execute("UPDATE mcp_session_processes SET beat_at = ? WHERE seq = ?",
                         (time.time(), process))

    def alive(self, process: int) -> bool:
        """Whether ``process`` said it was alive in the last ``LOST_AFTER_S``."""
        return bool(self.db.query("SELECT 1 FROM mcp_session_processes WHERE seq = ? AND "
                                  "beat_at >= ?", (process, time.time() - LOST_AFTER_S)))

    def end(self, session_id: str, *, keep_s: float) -> None:
        """``session_id`` was ended by its client; ends older than ``keep_s`` are dropped."""
        now = time.time()
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO mcp_sessions_ended (session, ended_at) VALUES (?, ?) "
                         "ON CONFLICT (session) DO NOTHING", (digest(session_id), now))
            conn.execute("DELETE FROM mcp_sessions_ended WHERE ended_at < ?", (now - keep_s,))

    def ended_since(self, since: float) -> list[tuple[str, float]]:
        """(digest, when) of the sessions ended at ``since`` or after."""
        rows = self.db.query("SELECT session, ended_at FROM mcp_sessions_ended WHERE "
                             "ended_at >= ?", (since,))
        return [(str(session), float(str(at))) for session, at in rows]

    def ended(self, session_id: str) -> bool:
        return bool(self.db.query("SELECT 1 FROM mcp_sessions_ended WHERE session = ?",
                                  (digest(session_id),)))

    def post(self, session_id: str, request_id: Any, body: dict[str, Any]) -> None:
        """The client's answer ``body`` to request ``request_id`` of ``session_id``."""
        now = time.time()
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO mcp_session_answers (session, request_id, body, "
                         "posted_at) VALUES (?, ?, ?, ?) ON CONFLICT (session, request_id) "
                         "DO UPDATE SET body = excluded.body, posted_at = excluded.posted_at",
                         (digest(session_id), json.dumps(request_id), json.dumps(body), now))
            conn.execute("DELETE FROM mcp_session_answers WHERE posted_at < ?",
                         (now - ANSWER_TTL_S,))

    def take(self, session_id: str, request_ids: list[Any]) -> list[dict[str, Any]]:
        """The answers posted to those of ``request_ids`` that have one, each taken once."""
        keys = [json.dumps(r) for r in request_ids]
        if not keys:
            return []
        marks = ", ".join("?" for _ in keys)
        session = digest(session_id)
        with self.db.transaction() as conn:
            rows = conn.execute(f"SELECT request_id, body FROM mcp_session_answers WHERE "
                                f"session = ? AND request_id IN ({marks})",
                                (session, *keys)).fetchall()
            taken = [body for request_id, body in rows if conn.execute(
                "DELETE FROM mcp_session_answers WHERE session = ? AND request_id = ?",
                (session, request_id)).rowcount == 1]  # once, whoever else looked
        found = [json.loads(str(body)) for body in taken]
        return [answer for answer in found if isinstance(answer, dict)]


async def beating(store: SessionStore, number: int) -> None:
    """Tell ``store`` every ``BEAT_S`` that process ``number`` is alive, until cancelled (a
    store away for a moment: the next beat tries again)."""
    while True:
        await anyio.sleep(BEAT_S)
        try:
            await anyio.to_thread.run_sync(store.beat, number)
        except Exception:
            logger.warning("could not tell the store this process is alive", exc_info=True)
