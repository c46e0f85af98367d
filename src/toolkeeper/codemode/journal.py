"""A run's journal as the bridge keeps it: replay what a paused run was answered, record what
this one is answered, and pause.

A run that finds a journal (its client sent the same script before and it paused) answers its
calls from it, in order, as long as each call is the journaled one (same tool, same argument
digest); the first call past the journal runs live. A call that differs stops the run: the
script is not deterministic, and answering it live could run a journaled call twice.

Writing costs nothing until a call may ask a person: the answers so far are kept in memory,
and stored (with the asking call) just before that call goes to the door, so a server killed
while the call waits has them. From then on each answer is stored as it goes back
(write-through), so a server killed later in the run loses none either. A run that never
asks writes nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Literal

import anyio
import anyio.to_thread

from ..approval.journal import Asking, JournalEntry, RunJournals, run_key

__all__ = ["JOURNALED_BYTES", "RUN_JOURNAL_BYTES", "RunLog", "Stop"]

JOURNALED_BYTES = 1 << 20
"""The largest answer (as JSON) a journal keeps for one call; past it the run cannot pause."""
RUN_JOURNAL_BYTES = 16 << 20
"""The most a journal keeps for one run (as JSON); past it the run cannot pause."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Stop:
    """Why a run ended at a call without answering it: it ``paused`` (the call waits for a
    person: ``request_id``) or the request it paused on ``expired``."""

    kind: Literal["paused", "expired"]
    request_id: str
    seq: int
    tool: str
    line: int | None


class RunLog:
    """One run's journal: the calls to replay and the answers to record."""

    def __init__(self, journals: RunJournals, *, session_id: str, code: str) -> None:
        self.journals, self.session_id, self.code = journals, session_id, code
        self.run_id = run_key(session_id, code)
        self.replay: tuple[JournalEntry, ...] = ()
        self._by_seq: dict[int, JournalEntry] = {}
        self._last = 0
        """The last journaled call's number (calls and searches are numbered together)."""
        self.paused_on: str | None = None
        """The request the journal's last run paused on (still linked)."""
        self.asked_at: int | None = None
        self._unstored: list[JournalEntry] = []
        self._stored = False
        self._size = 0
        self.unresumable = ""
        """Why this run cannot pause (an answer too big to keep), when it cannot."""
        self.diverged = False
        """A call differed from the journaled one: the run stopped, the journal stays."""

    async def load(self) -> None:
        """Read the journal of this run, if there is one."""
        found = await anyio.to_thread.run_sync(self.journals.load, self.run_id)
        if found is None:
            return
        self.replay, self.paused_on, self._stored = found.entries, found.request_id, True
        self._by_seq = {e.seq: e for e in found.entries}
        self._last = max(self._by_seq, default=0)
        self.asked_at = found.asking.seq if found.asking is not None else None
        self._size = sum(len(json.dumps(e.answer)) for e in found.entries)

    @property
    def stored(self) -> bool:
        """Whether the run has a journal in the store (answers are written as they come)."""
        return self._stored

    @property
    def replaying(self) -> int:
        """How many calls the journal answers."""
        return len(self.replay)

    def step(self, seq: int, tool: str, digest: str) -> JournalEntry | str | None:
        """The journaled answer of call ``seq``; ``None`` past the journal (the call runs
        live); a sentence saying how it differs when it is not the journaled call."""
        entry = self._by_seq.get(seq)
        if entry is None and seq > self._last:
            return None
        if entry is not None and entry.tool == tool and entry.args_digest == digest:
            return entry
        return self._differs(seq, f"'{tool}'", entry)

    def search(self, seq: int) -> str | None:
        """``None`` when call ``seq`` of the journaled run was not a tool call (a search is
        numbered with the calls, not journaled); else a sentence saying how it differs."""
        entry = self._by_seq.get(seq)
        return None if entry is None else self._differs(seq, "a search of the tools", entry)

    def _differs(self, seq: int, made: str, entry: JournalEntry | None) -> str:
        self.diverged = True
        what = (f"{made} where the run that paused searched the tools" if entry is None
                else f"{made} instead of '{entry.tool}'" if made != f"'{entry.tool}'"
                else f"{made} with other arguments than the journaled call's")
        return (f"the script is not deterministic: call {seq} is {what}, in the journal of the "
                f"run that paused. It was not run, nor anything after it, so that no journaled "
                f"call runs twice. To run the script afresh (every call runs again), send a "
                "changed script; to resume the paused run, send exactly the same one and make "
                "its calls depend only on what the tools answer (not on the clock or chance).")

    def at_pause(self, seq: int) -> bool:
        """Whether call ``seq`` is the one the journal's run paused on."""
        return self.paused_on is not None and seq == self.asked_at

    async def before_asking(self, seq: int, tool: str, digest: str, line: int | None) -> None:
        """Store what the run was answered so far and the call about to ask a person."""
        if self.unresumable:
            return
        unstored = self._encoded()
        if unstored is None:
            await self.ended()
            return
        await anyio.to_thread.run_sync(lambda: self.journals.write(
            self.run_id, session_id=self.session_id, code=self.code, entries=unstored,
            asking=Asking(seq=seq, tool=tool, args_digest=digest, line=line)))
        self._stored = True
        self.paused_on = None

    async def answered(self, entry: JournalEntry) -> None:
        """Record the answer of a call (stored at once once the run has a journal)."""
        if self.unresumable:
            return
        self._unstored.append(entry)
        if not self._stored:
            return
        unstored = self._encoded()
        if unstored is None:
            await self.ended()
            return
        await anyio.to_thread.run_sync(lambda: self.journals.write(
            self.run_id, session_id=self.session_id, code=self.code, entries=unstored))

    def _encoded(self) -> list[JournalEntry] | None:
        """The answers not stored yet, as JSON keeps them (what JSON cannot carry as its
        ``repr``, as the bridge sends it); ``None`` once one is too big to keep."""
        unstored, self._unstored, encoded = self._unstored, [], []
        for entry in unstored:
            text = json.dumps(entry.answer, default=repr)
            self._size += len(text)
            if len(text) > JOURNALED_BYTES or self._size > RUN_JOURNAL_BYTES:
                self.unresumable = (
                    f"the answer of call {entry.seq} ('{entry.tool}', {len(text):,} bytes as "
                    f"JSON) is over what a journal keeps ({JOURNALED_BYTES:,} bytes a call, "
                    f"{RUN_JOURNAL_BYTES:,} a run), so the run could not be resumed without "
                    "running its calls again")
                return None
            encoded.append(replace(entry, answer=json.loads(text)))
        return encoded

    async def paused(self, request_id: str) -> None:
        """The run pauses on ``request_id``: link it (the next run checks it first)."""
        await anyio.to_thread.run_sync(self.journals.link, self.run_id, request_id)

    async def unlink(self) -> None:
        """The request the run paused on is over (expired): the next run asks anew."""
        await anyio.to_thread.run_sync(self.journals.link, self.run_id, None)

    async def ended(self) -> None:
        """The run ended without pausing: its journal goes."""
        if self._stored:
            self._stored = False
            await anyio.to_thread.run_sync(self.journals.drop, self.run_id)
