"""The store of MCP tasks on a real SQLite file and a real PostgreSQL database: a task is
kept for its TTL and then forgotten, answers arrive a part at a time, and the first end of a
task wins (a cancel is not overwritten by the run finishing after it)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from toolkeeper.mcp.task_store import TaskRecord, TaskStore


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> TaskStore:
    if request.param == "sqlite":
        return TaskStore(tmp_path / "toolkeeper.db")
    return TaskStore(request.getfixturevalue("postgres_url"))


def test_a_task_is_kept_for_its_ttl_then_forgotten(store: TaskStore) -> None:
    now = time.time()
    store.create(TaskRecord(id="old", client="ci", tool="render", created_at=now - 61,
                            ttl_ms=60_000))
    store.create(TaskRecord(id="new", client="ci", tool="render", created_at=now - 59,
                            ttl_ms=60_000))
    assert store.get("new", "ci") is not None and store.get("old", "ci") is None
    assert [t.id for t in store.list("ci")] == ["new"]
    assert store.forget_expired() == 0  # the read of the expired one forgot it already
    assert store.get("new", "someone-else") is None  # a client's own only


def test_answers_arrive_a_part_at_a_time_and_the_first_end_wins(store: TaskStore) -> None:
    store.create(TaskRecord(id="t", client="ci", tool="ask"))
    assert store.ask("t", {"a": {"method": "elicitation/create"},
                           "b": {"method": "elicitation/create"}}, "waiting")
    assert store.answer("t", "ci", {"a": {"action": "accept"}, "zzz": {}})
    half = store.get("t", "ci")
    assert half is not None and half.status == "input_required" and list(half.asked) == ["b"]
    assert half.answers == {"a": {"action": "accept"}}
    assert not store.answer("t", "mallory", {"b": {}})
    assert store.answer("t", "ci", {"b": {"action": "decline"}})
    whole = store.get("t", "ci")
    assert whole is not None and whole.status == "working" and not whole.asked
    assert store.settle("t", "cancelled", message="cancelled by the client")
    assert not store.settle("t", "completed", result={"content": []})
    over = store.get("t", "ci")
    assert over is not None and over.status == "cancelled" and over.result is None


def test_each_change_this_process_makes_is_heard_at_once(store: TaskStore) -> None:
    """A client following its task is told at once of a change made here (the observers)."""
    heard: list[str] = []
    store.observers.append(heard.append)
    store.create(TaskRecord(id="t", client="ci", tool="ask"))
    store.waits_for("t", "apr_1", "a person must decide")
    store.ask("t", {"a": {"method": "elicitation/create"}}, "waiting")
    assert not store.answer("t", "mallory", {"a": {}})  # no change: nothing heard
    store.answer("t", "ci", {"a": {"action": "accept"}})
    store.resume("t")
    store.settle("t", "completed", result={"content": []})
    assert heard == ["t"] * 6
