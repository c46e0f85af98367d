"""Run journals in the approval store's SQLite file: seen by another process's store on the same
file, and gone a day after they last changed."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from toolkeeper.approval import SqliteApprovalStore
from toolkeeper.approval.journal import KEEP_S, JournalEntry, journals_of, run_key


def _entry(seq: int) -> JournalEntry:
    return JournalEntry(seq=seq, tool="note", args_digest="d", line=None, answer={"n": seq})


def test_a_journal_written_by_one_store_is_read_by_another_on_the_same_file(
        tmp_path: Path) -> None:
    writer = journals_of(SqliteApprovalStore(tmp_path / "toolkeeper.db"))
    reader = journals_of(SqliteApprovalStore(tmp_path / "toolkeeper.db"))
    assert writer is not None and reader is not None
    writer.write("run_a", session_id="s", code="x = 1", entries=[_entry(1), _entry(2)])
    found = reader.load("run_a")
    assert found is not None and [e.answer for e in found.entries] == [{"n": 1}, {"n": 2}]


def test_a_journal_nobody_resumed_is_gone_a_day_after_it_last_changed(tmp_path: Path) -> None:
    journals = journals_of(SqliteApprovalStore(tmp_path / "toolkeeper.db"))
    assert journals is not None
    for run in ("run_old", "run_older"):
        journals.write(run, session_id="s", code="x", entries=[_entry(1)])
    with sqlite3.connect(tmp_path / "toolkeeper.db") as db:
        db.execute("UPDATE approval_runs SET updated_at = ?", (time.time() - KEEP_S - 1,))
    assert journals.load("run_old") is None  # read: gone
    journals.write("run_new", session_id="s", code="y", entries=[_entry(1)])  # written: pruned
    with sqlite3.connect(tmp_path / "toolkeeper.db") as db:
        runs = [r[0] for r in db.execute("SELECT run_id FROM approval_runs")]
        entries = {r[0] for r in db.execute("SELECT run_id FROM approval_journal")}
    assert runs == ["run_new"] and entries == {"run_new"}


def test_a_run_is_named_by_its_clients_session_and_its_code() -> None:
    assert run_key("client-a", "x = 1") == run_key("client-a", "x = 1")
    assert len({run_key("client-a", "x = 1"), run_key("client-b", "x = 1"),
                run_key("client-a", "x = 2")}) == 3


def test_a_store_without_a_database_keeps_no_journals() -> None:
    assert journals_of(object()) is None
