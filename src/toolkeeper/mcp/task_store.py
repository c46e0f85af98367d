"""The state of MCP tasks, kept in the server's store (the approvals' SQLite file, or the
PostgreSQL database replicas share), so any replica answers ``tasks/get`` and ``tasks/cancel``
for a task another started, and a client's answers (``tasks/update``) reach the replica that
runs it. A task is its client's alone: every read names the client, and another client's task
is not found. A task is kept for its TTL after it was made, then forgotten."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..approval.pg import open_database
from ..approval.sqlite import Database, number, text_or_none

__all__ = ["TERMINAL", "TaskRecord", "TaskStatus", "TaskStore"]

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL = frozenset({"completed", "failed", "cancelled"})

_SCHEMA = """
CREATE TABLE IF NOT EXISTS mcp_tasks (
    id TEXT PRIMARY KEY,
    client TEXT NOT NULL,
    tool TEXT NOT NULL,
    status TEXT NOT NULL,
    message TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    ttl_ms INTEGER NOT NULL,
    result TEXT,
    error TEXT,
    asked TEXT NOT NULL DEFAULT '{}',
    answers TEXT NOT NULL DEFAULT '{}',
    approval TEXT
);
CREATE INDEX IF NOT EXISTS mcp_tasks_client ON mcp_tasks (client, created_at);
CREATE TABLE IF NOT EXISTS mcp_task_runs (
    task TEXT PRIMARY KEY,
    process INTEGER NOT NULL
);
"""
_COLUMNS = ("id, client, tool, status, message, created_at, updated_at, ttl_ms, result, error, "
            "asked, answers, approval")
_READ = f"SELECT {_COLUMNS}, process FROM mcp_tasks LEFT JOIN mcp_task_runs ON task = id"
"""A task with the process that runs it (``mcp_task_runs``: a table of its own, so a store
made before it keeps its tasks as they are)."""


@dataclass
class TaskRecord:
    """One task as the store keeps it: ``asked`` the client's input still wanted (id →
    request), ``answers`` what it answered so far (id → response), ``result`` the tool's MCP
    result once completed, ``error`` a JSON-RPC error once failed."""

    id: str
    client: str
    tool: str
    status: TaskStatus = "working"
    message: str | None = None
    created_at: float = field(default_factory=time.time)
    updated_at: float = 0.0
    ttl_ms: int = 3_600_000
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    asked: dict[str, Any] = field(default_factory=dict)
    answers: dict[str, Any] = field(default_factory=dict)
    approval: str | None = None
    """The approval request the task waits on for a person's decision, if it does."""
    process: int | None = None
    """The number of the process that runs it (``SessionStore.process_number``), which
    tells the store it is alive: a task whose process fell silent ended with it."""

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


class TaskStore:
    """MCP tasks in ``target``: the approval store's database, a SQLite path or a
    ``postgresql://`` URL (``open_database``)."""

    def __init__(self, target: str | Path | Database) -> None:
        self.db = open_database(target, _SCHEMA, "mcp_tasks")
        self.observers: list[Callable[[str], None]] = []
        """Each called with a task's id after this process changed the task (from the thread
        that changed it): a client following the task is told at once, not at the next poll."""

    def _changed(self, task_id: str) -> None:
        for observer in list(self.observers):
            observer(task_id)

    def create(self, task: TaskRecord) -> None:
        task.updated_at = task.created_at
        with self.db.transaction() as conn:
            conn.execute(f"INSERT INTO mcp_tasks ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, "
                         "?, ?, ?, ?, ?)", _row(task))
            if task.process is not None:
                conn.execute("INSERT INTO mcp_task_runs (task, process) VALUES (?, ?)",
                             (task.id, task.process))
        self._changed(task.id)

    def get(self, task_id: str, client: str) -> TaskRecord | None:
        """``client``'s task ``task_id`` while its TTL lasts, else ``None``."""
        rows = self.db.query(f"{_READ} WHERE id = ? AND client = ?", (task_id, client))
        if not rows:
            return None
        task = _record(rows[0])
        if time.time() > task.created_at + task.ttl_ms / 1000:
            self.forget_expired()
            return None
        return task

    def list(self, client: str) -> list[TaskRecord]:
        """``client``'s tasks whose TTL lasts, oldest first."""
        rows = self.db.query(f"{_READ} WHERE client = ? ORDER BY created_at, id", (client,))
        now = time.time()
        return [t for t in map(_record, rows) if now <= t.created_at + t.ttl_ms / 1000]

    def settle(self, task_id: str, status: TaskStatus, *, result: dict[str, Any] | None = None,
               error: dict[str, Any] | None = None, message: str | None = None) -> bool:
        """Move a task that is not over yet to ``status`` (its result or error with it).
        False when it was already over (cancelled meanwhile: the first end wins)."""
        with self.db.transaction() as conn:
            done = conn.execute(
                "UPDATE mcp_tasks SET status = ?, result = ?, error = ?, message = ?, "
                "updated_at = ? WHERE id = ? AND status NOT IN ('completed', 'failed', "
                "'cancelled')",
                (status, _dump(result), _dump(error), message, time.time(), task_id))
            moved = done.rowcount > 0
        self._changed(task_id)
        return moved

    def ask(self, task_id: str, asked: dict[str, Any], message: str | None) -> bool:
        """The task waits for the client's answers to ``asked`` (``input_required``)."""
        with self.db.transaction() as conn:
            done = conn.execute(
                "UPDATE mcp_tasks SET status = 'input_required', asked = ?, message = ?, "
                "updated_at = ? WHERE id = ? AND status NOT IN ('completed', 'failed', "
                "'cancelled')", (json.dumps(asked), message, time.time(), task_id))
            moved = done.rowcount > 0
        self._changed(task_id)
        return moved

    def answer(self, task_id: str, client: str, responses: dict[str, Any]) -> bool:
        """Record ``client``'s answers to its task: the keys it asked leave ``asked``; once
        none is left the task is working again. False: no such task of this client."""
        with self.db.transaction() as conn:
            row = conn.execute("SELECT asked, answers, status FROM mcp_tasks WHERE id = ? AND "
                               "client = ?", (task_id, client)).fetchone()
            if row is None:
                return False
            asked, answers = json.loads(str(row[0])), json.loads(str(row[1]))
            fitting = {k: v for k, v in responses.items() if k in asked}
            answers.update(fitting)
            asked = {k: v for k, v in asked.items() if k not in fitting}
            status = str(row[2])
            if status == "input_required" and not asked:
                status = "working"
            conn.execute("UPDATE mcp_tasks SET asked = ?, answers = ?, status = ?, "
                         "updated_at = ? WHERE id = ?",
                         (json.dumps(asked), json.dumps(answers), status, time.time(), task_id))
        self._changed(task_id)
        return True

    def waits_for(self, task_id: str, approval: str, message: str) -> None:
        """The task waits for a person's decision on the approval request ``approval``."""
        with self.db.transaction() as conn:
            conn.execute("UPDATE mcp_tasks SET approval = ?, message = ?, updated_at = ? "
                         "WHERE id = ?", (approval, message, time.time(), task_id))
        self._changed(task_id)

    def resume(self, task_id: str) -> None:
        """The task runs again with its answers (nothing is asked any more)."""
        with self.db.transaction() as conn:
            conn.execute("UPDATE mcp_tasks SET status = 'working', asked = '{}', message = "
                         "NULL, updated_at = ? WHERE id = ? AND status = 'input_required'",
                         (time.time(), task_id))
        self._changed(task_id)

    def forget_expired(self) -> int:
        """Remove the tasks whose TTL is over. Returns how many."""
        with self.db.transaction() as conn:
            gone = conn.execute("DELETE FROM mcp_tasks WHERE created_at + ttl_ms / 1000.0 < ?",
                                (time.time(),)).rowcount
            conn.execute("DELETE FROM mcp_task_runs WHERE task NOT IN (SELECT id FROM "
                         "mcp_tasks)")
            return gone


def _dump(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value)


def _load(cell: object) -> dict[str, Any] | None:
    text = text_or_none(cell)
    found = json.loads(text) if text else None
    return found if isinstance(found, dict) else None


def _row(task: TaskRecord) -> tuple[object, ...]:
    return (task.id, task.client, task.tool, task.status, task.message, task.created_at,
            task.updated_at, task.ttl_ms, _dump(task.result), _dump(task.error),
            json.dumps(task.asked), json.dumps(task.answers), task.approval)


def _record(row: tuple[object, ...]) -> TaskRecord:
    status = str(row[3])
    assert status in ("working", "input_required", "completed", "failed", "cancelled")
    return TaskRecord(id=str(row[0]), client=str(row[1]), tool=str(row[2]),
                      status=status,  # type: ignore[arg-type]
                      message=text_or_none(row[4]), created_at=number(row[5]),
                      updated_at=number(row[6]), ttl_ms=int(number(row[7])),
                      result=_load(row[8]), error=_load(row[9]), asked=_load(row[10]) or {},
                      answers=_load(row[11]) or {}, approval=text_or_none(row[12]),
                      process=None if row[13] is None else int(number(row[13])))
