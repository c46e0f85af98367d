"""Run journals: what a paused code-mode script was answered, kept beside the approvals.

A script whose call needs a person pauses: the run ends ``pending`` with the request, and the
script is run again, whole, once the person has decided. So that the calls it already made do
not run twice, the host keeps a journal of the run in the approval store's database (it
survives a restart, and every replica sharing the database sees it): one row per run — the
client's session, the script, the call that asks a person (its place, tool, argument digest
and line) and, once known, the request it paused on — and one row per answered call, in
order: tool, argument digest, the line it was made on and the answer the script got.

A run is named by its client's session and its code (``run_key``): the same script sent again
by the same client finds its journal. A journal ends when a run of it ends without pausing,
or ``KEEP_S`` after it last changed.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

from .models import ApprovalRequest
from .pg import open_database
from .sqlite import Database, number, text_or_none
from .store import SqliteApprovalStore

__all__ = ["KEEP_S", "Asking", "JournalEntry", "RunJournal", "RunJournals", "ScriptView",
           "journals_of", "run_key"]

KEEP_S = 86_400.0
"""How long a journal nobody resumed is kept after it last changed (a day)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS approval_runs (
    run_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    code TEXT NOT NULL,
    ask_seq INTEGER,
    ask_tool TEXT,
    ask_digest TEXT,
    ask_line INTEGER,
    request_id TEXT,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS approval_runs_asking ON approval_runs(session_id, ask_tool, ask_digest);
CREATE INDEX IF NOT EXISTS approval_runs_request ON approval_runs(request_id);
CREATE TABLE IF NOT EXISTS approval_journal (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    tool TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    line INTEGER,
    answer TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
"""

_RUN = ("SELECT session_id, code, ask_seq, ask_tool, ask_digest, ask_line, request_id, "
        "updated_at FROM approval_runs WHERE run_id = ?")


def run_key(session_id: str, code: str) -> str:
    """The name of a run: its client's session and its code (the same script sent again by
    the same client is the same run)."""
    digest = hashlib.sha256(f"{session_id}\n{code}".encode("utf-8", "surrogatepass"))
    return "run_" + digest.hexdigest()[:40]


@dataclass(frozen=True, kw_only=True, slots=True)
class JournalEntry:
    """One call a script made and the answer it got (``seq`` counts from 1, as the host
    numbered the calls)."""

    seq: int
    tool: str
    args_digest: str
    line: int | None
    answer: dict[str, object]


@dataclass(frozen=True, kw_only=True, slots=True)
class Asking:
    """The call of a run that asks a person (or asked, for the request it paused on)."""

    seq: int
    tool: str
    args_digest: str
    line: int | None


@dataclass(frozen=True, kw_only=True, slots=True)
class RunJournal:
    """A journal as stored: the run, the call that asks, the request it paused on, and every
    call answered before, in order."""

    run_id: str
    session_id: str
    code: str
    asking: Asking | None
    request_id: str | None
    entries: tuple[JournalEntry, ...]
    updated_at: float


@dataclass(frozen=True, kw_only=True, slots=True)
class ScriptView:
    """What a card shows of the script a call came from: the code, the line of the call (as
    the script's side reported it) and the calls answered before it."""

    run_id: str
    code: str
    line: int | None
    before: tuple[tuple[str, str], ...]
    """(tool, status) of each call answered before this one."""


class RunJournals:
    """Journals in one database (a ``SqliteFile`` or ``PgDatabase``), beside the approvals."""

    def __init__(self, db: Database) -> None:
        self.db = open_database(db, _SCHEMA, "approval_journal")

    def load(self, run_id: str) -> RunJournal | None:
        """The journal of ``run_id``, or ``None`` (never written, ended, or older than
        ``KEEP_S``)."""
        rows = self.db.query(_RUN, (run_id,))
        if not rows:
            return None
        session, code, seq, tool, digest, line, request, updated = rows[0]
        if number(updated) < time.time() - KEEP_S:
            self.drop(run_id)
            return None
        asking = None if seq is None else Asking(
            seq=int(number(seq)), tool=str(tool), args_digest=str(digest),
            line=None if line is None else int(number(line)))
        found = self.db.query("SELECT seq, tool, args_digest, line, answer FROM approval_journal "
                              "WHERE run_id = ? ORDER BY seq", (run_id,))
        entries = tuple(JournalEntry(seq=int(number(s)), tool=str(t), args_digest=str(d),
                                     line=None if ln is None else int(number(ln)),
                                     answer=json.loads(str(a))) for s, t, d, ln, a in found)
        return RunJournal(run_id=run_id, session_id=str(session), code=str(code), asking=asking,
                          request_id=text_or_none(request), entries=entries,
                          updated_at=number(updated))

    def write(self, run_id: str, *, session_id: str, code: str,
              entries: Sequence[JournalEntry], asking: Asking | None = None) -> None:
        """Store ``entries`` (those already stored stay as they are) and, with ``asking``, the
        call that is about to ask a person (its request is not known yet: any earlier link
        goes). One transaction; journals past ``KEEP_S`` are removed on the way."""
        now = time.time()
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO approval_runs (run_id, session_id, code, updated_at) "
                         "VALUES (?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET updated_at = "
                         "excluded.updated_at", (run_id, session_id, code, now))
            if asking is not None:
                conn.execute("UPDATE approval_runs SET ask_seq = ?, ask_tool = ?, ask_digest = "
                             "?, ask_line = ?, request_id = NULL WHERE run_id = ?",
                             (asking.seq, asking.tool, asking.args_digest, asking.line, run_id))
            for entry in entries:
                conn.execute("INSERT INTO approval_journal (run_id, seq, tool, args_digest, "
                             "line, answer) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, seq) "
                             "DO NOTHING", (run_id, entry.seq, entry.tool, entry.args_digest,
                                            entry.line, json.dumps(entry.answer)))
            old = now - KEEP_S
            conn.execute("DELETE FROM approval_journal WHERE run_id IN (SELECT run_id FROM "
                         "approval_runs WHERE updated_at < ?)", (old,))
            conn.execute("DELETE FROM approval_runs WHERE updated_at < ?", (old,))

    def link(self, run_id: str, request_id: str | None) -> None:
        """Record the request the run paused on (``None``: none any more — the next run of it
        asks anew)."""
        with self.db.transaction() as conn:
            conn.execute("UPDATE approval_runs SET request_id = ?, updated_at = ? WHERE "
                         "run_id = ?", (request_id, time.time(), run_id))

    def drop(self, run_id: str) -> None:
        """End the journal of ``run_id`` (its run ended without pausing)."""
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM approval_journal WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM approval_runs WHERE run_id = ?", (run_id,))

    def script_for(self, request: ApprovalRequest) -> ScriptView | None:
        """The script ``request`` came from, when a code-mode run asked it: the run that
        paused on it, else the newest run of its session whose asking call is this one."""
        rows = self.db.query("SELECT run_id FROM approval_runs WHERE request_id = ?",
                             (request.id,))
        if not rows:
            rows = self.db.query("SELECT run_id FROM approval_runs WHERE session_id = ? AND "
                                 "ask_tool = ? AND ask_digest = ? ORDER BY updated_at DESC "
                                 "LIMIT 1", (request.session_id, request.tool,
                                             request.args_digest))
        journal = self.load(str(rows[0][0])) if rows else None
        if journal is None:
            return None
        asking = journal.asking
        line = asking.line if asking is not None and asking.tool == request.tool and \
            asking.args_digest == request.args_digest else None
        before = tuple((e.tool, str(e.answer.get("status", ""))) for e in journal.entries
                       if asking is None or e.seq < asking.seq)
        return ScriptView(run_id=journal.run_id, code=journal.code, line=line, before=before)


def journals_of(store: object) -> RunJournals | None:
    """The journals kept beside ``store``: in its database when it has one (the SQLite and
    PostgreSQL stores), else ``None`` — a run under such a store does not pause."""
    return RunJournals(store.db) if isinstance(store, SqliteApprovalStore) else None
