"""The events of the SSE streams a session-keeping HTTP server (``--sessions``) sent, kept in
the store so a client whose stream broke resumes it (``Last-Event-ID``) on whichever worker or
replica its ``GET`` reaches — the SDK's ``EventStore`` interface, one per session.

The SDK's transport stores each event before it sends it, and on a ``GET`` with
``Last-Event-ID`` asks the store to replay what came after; it then tails the stream in its
own memory, where events of a call another process runs never arrive. So a request's stream is
replayed here and then *followed* through the store until its last event (the call's result
or error) has been sent, and the transport is told nothing is left to tail: every event once,
the result once, whichever process runs the call. The session's own ``GET`` stream (no call
ends it) is replayed and then tailed by the transport as the SDK does.

Events are kept ``KEEP_S`` after they were stored; a stream is followed while it sends an
event at least that often, and while the process running its call is alive: a stream whose
process was lost (killed, cut off from the store) ends with an error saying so, which the
client's call returns."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import anyio
from mcp.server.streamable_http import GET_STREAM_KEY, EventCallback, EventMessage, EventStore
from mcp_types import ErrorData, JSONRPCError, JSONRPCMessage, JSONRPCResponse, jsonrpc_message_adapter

from ..approval.pg import open_database
from ..approval.sqlite import Database
from .session_store import LOST_AFTER_S, digest
from .wire import INTERNAL_ERROR

__all__ = ["FOLLOW_POLL_S", "KEEP_S", "SessionEvents", "StoredEvents"]

KEEP_S = 600.0
"""How long an event can be resumed from after it was stored."""
FOLLOW_POLL_S = 0.05
"""How often a resumed stream whose call runs elsewhere looks for its next events."""
_PRUNE_EVERY_S = 30.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS mcp_session_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    session TEXT NOT NULL,
    stream TEXT NOT NULL,
    process INTEGER NOT NULL,
    body TEXT,
    stored_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS mcp_session_events_stream ON mcp_session_events (session, stream, seq);
CREATE INDEX IF NOT EXISTS mcp_session_events_at ON mcp_session_events (stored_at);
"""


class StoredEvents:
    """The events of every session's streams in ``target`` (the approval store's database: a
    SQLite file or the PostgreSQL database replicas share), each numbered by the store and
    marked with the ``process`` that stored it; ``alive`` says whether a process still is."""

    def __init__(self, target: str | Path | Database, *, alive: Callable[[int], bool],
                 keep_s: float = KEEP_S) -> None:
        self.db = open_database(target, _SCHEMA, "mcp_session_events")
        self.alive, self.keep_s = alive, keep_s
        self.process = 0
        """This process's number in the store (set once it has one)."""
        self._pruned = 0.0

    def add(self, session: str, stream: str, body: str | None) -> int:
        """Keeps an event (``body`` ``None``: a priming event, never replayed); its number."""
        now = time.time()
        with self.db.transaction() as conn:
            row = conn.execute("INSERT INTO mcp_session_events (session, stream, process, "
                               "body, stored_at) VALUES (?, ?, ?, ?, ?) RETURNING seq",
                               (session, stream, self.process, body, now)).fetchone()
            if now - self._pruned > _PRUNE_EVERY_S:
                self._pruned = now
                conn.execute("DELETE FROM mcp_session_events WHERE stored_at < ?",
                             (now - self.keep_s,))
        if row is None:  # pragma: no cover - RETURNING always answers
            raise RuntimeError("the store numbered no event")
        return int(str(row[0]))

    def stream_of(self, session: str, seq: int) -> tuple[str, int] | None:
        """The stream of event ``seq`` and the process that stored it."""
        rows = self.db.query("SELECT stream, process FROM mcp_session_events WHERE "
                             "session = ? AND seq = ?", (session, seq))
        return (str(rows[0][0]), int(str(rows[0][1]))) if rows else None

    def after(self, session: str, stream: str, seq: int) -> list[tuple[int, str | None]]:
        """The events of ``stream`` numbered after ``seq``, in order."""
        rows = self.db.query("SELECT seq, body FROM mcp_session_events WHERE session = ? AND "
                             "stream = ? AND seq > ? ORDER BY seq", (session, stream, seq))
        return [(int(str(n)), None if body is None else str(body)) for n, body in rows]


class SessionEvents(EventStore):
    """One session's events (the SDK's ``EventStore`` for its transport): a replay sees this
    session's streams only, whatever event id a client names."""

    def __init__(self, events: StoredEvents, session_id: str) -> None:
        self.events, self.session = events, digest(session_id)

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        body = None if message is None else message.model_dump_json(by_alias=True,
                                                                    exclude_unset=True)
        seq = await anyio.to_thread.run_sync(self.events.add, self.session, stream_id, body)
        return str(seq)

    async def replay_events_after(self, last_event_id: str,
                                  send_callback: EventCallback) -> str | None:
        """Sends what ``last_event_id``'s stream sent after it; a request's stream followed to
        its end (then ``None``: nothing left for the transport to tail), the session's ``GET``
        stream's id (the transport tails it). ``None`` for an unknown or expired event."""
        if not (last_event_id.isascii() and last_event_id.isdigit()) or len(last_event_id) > 18:
            return None  # not a number the store gave (and none a 64-bit column holds)
        seq = int(last_event_id)
        found = await anyio.to_thread.run_sync(self.events.stream_of, self.session, seq)
        if found is None:
            return None
        stream, process = found
        if stream == GET_STREAM_KEY:
            await self._send_after(stream, seq, send_callback)
            return stream
        await self._follow(stream, process, seq, send_callback)
        return None

    async def _follow(self, stream: str, process: int, seq: int, send: EventCallback) -> None:
        """``stream``'s events after ``seq`` as ``process`` stores them, until its last one
        (or an error saying ``process`` was lost)."""
        quiet_since = checked = time.monotonic()
        while time.monotonic() - quiet_since < self.events.keep_s:
            last, ended = await self._send_after(stream, seq, send)
            if ended:
                return
            if last != seq:
                seq, quiet_since = last, time.monotonic()
            elif time.monotonic() - checked > LOST_AFTER_S / 4:
                checked = time.monotonic()
                if not await anyio.to_thread.run_sync(self.events.alive, process):
                    await send(EventMessage(_lost(stream), None))
                    return
            await anyio.sleep(FOLLOW_POLL_S)

    async def _send_after(self, stream: str, seq: int, send: EventCallback) -> tuple[int, bool]:
        """Sends the stored events after ``seq``: the last one's number and whether it ended
        the stream (a result or an error)."""
        found = await anyio.to_thread.run_sync(self.events.after, self.session, stream, seq)
        for seq, body in found:
            if body is None:
                continue
            message = jsonrpc_message_adapter.validate_json(body, by_name=False)
            await send(EventMessage(message, str(seq)))
            if isinstance(message, JSONRPCResponse | JSONRPCError):
                return seq, True
        return seq, False


def _lost(stream: str) -> JSONRPCError:
    """The answer of a call whose process was lost before it finished (the client answers its
    own request with it, whatever id it bears)."""
    return JSONRPCError(jsonrpc="2.0", id=int(stream) if stream.isdecimal() else stream,
                        error=ErrorData(code=INTERNAL_ERROR, message=(
                            "the server process running this call stopped before the call "
                            "finished: it may have partly run. Call it again.")))
