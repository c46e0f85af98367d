"""A run's journal as the bridge reads it: calls and searches are numbered together, only calls
are journaled, and the replay keeps its place by the host's numbers."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper.approval import SqliteApprovalStore
from toolkeeper.approval.journal import JournalEntry, RunJournals, journals_of
from toolkeeper.codemode.journal import RunLog

pytestmark = pytest.mark.anyio


def _journals(tmp_path: Path) -> RunJournals:
    journals = journals_of(SqliteApprovalStore(tmp_path / "toolkeeper.db"))
    assert journals is not None
    return journals


async def test_a_search_the_paused_run_made_is_a_place_in_the_replay(tmp_path: Path) -> None:
    journals = _journals(tmp_path)
    written = RunLog(journals, session_id="s", code="x")
    # call 1 was a search (not journaled), calls 2 and 3 answered, call 4 asks a person
    for seq in (2, 3):
        await written.answered(JournalEntry(seq=seq, tool="note", args_digest=f"d{seq}",
                                            line=None, answer={"status": "ok"}))
    await written.before_asking(4, "deploy", "d4", None)
    await written.paused("apr_1")
    log = RunLog(journals, session_id="s", code="x")
    await log.load()
    assert log.search(1) is None  # the same search, at the same place
    assert isinstance(log.step(2, "note", "d2"), JournalEntry)
    assert isinstance(log.step(3, "note", "d3"), JournalEntry)
    assert log.step(4, "deploy", "d4") is None and log.at_pause(4)  # past the journal: live
    assert not log.diverged


async def test_a_call_where_a_search_was_and_a_search_where_a_call_was_both_differ(
        tmp_path: Path) -> None:
    journals = _journals(tmp_path)
    written = RunLog(journals, session_id="s", code="x")
    await written.answered(JournalEntry(seq=2, tool="note", args_digest="d2", line=None,
                                        answer={"status": "ok"}))
    await written.before_asking(3, "deploy", "d3", None)
    log = RunLog(journals, session_id="s", code="x")
    await log.load()
    said = log.step(1, "note", "d2")
    assert isinstance(said, str) and "call 1 is 'note' where the run that paused searched" in said
    said = log.search(2)
    assert said is not None and "call 2 is a search of the tools instead of 'note'" in said
    assert log.diverged
