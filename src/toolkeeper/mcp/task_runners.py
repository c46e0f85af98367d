"""Which process runs each MCP task, and whether it still does.

A task runs in the process that made it, and only there; its state is in the store, where any
replica reads it. A process that stops cleanly ends its tasks itself (``tasks.py``: failed,
saying to call the tool again). One that is killed (kill -9, a lost machine) cannot: its tasks
would read ``working`` to the end of their TTL, and ``tasks/result`` would wait that long. So
each process takes a number from the store and tells it every ``BEAT_S`` that it is alive, as
the processes serving sessions do (``session_store.py``, the same table), and each task names
the number of its process; whoever reads a task whose process has been silent for
``LOST_AFTER_S`` ends it as the process would have at its stop."""

from __future__ import annotations

import anyio
from anyio.abc import TaskGroup

from .session_store import SessionStore, beating
from .task_store import TaskRecord, TaskStore
from .wire import INTERNAL_ERROR

__all__ = ["STOPPED", "Runners"]

STOPPED = "the server stopped before the task ended: call the tool again"
"""What a task says when its server stopped (or was lost) while it ran or waited."""


class Runners:
    """This process's number on ``store`` (``number``, once ``start`` took it) and its
    heartbeat, and the tasks of processes that fell silent, ended when read."""

    def __init__(self, store: TaskStore) -> None:
        self.store = store
        self.processes = SessionStore(store.db)
        self.number: int | None = None

    async def start(self, group: TaskGroup) -> None:
        """Take this process's number and tell the store it is alive from now on, in
        ``group`` (until it is cancelled)."""
        self.number = await anyio.to_thread.run_sync(self.processes.process_number)
        group.start_soon(beating, self.processes, self.number)

    async def checked(self, task: TaskRecord) -> TaskRecord:
        """``task`` as it stands: failed with ``STOPPED`` when it was not over and the process
        running it is lost (silent for ``LOST_AFTER_S``)."""
        if task.terminal or task.process is None or task.process == self.number:
            return task
        if await anyio.to_thread.run_sync(self.processes.alive, task.process):
            return task
        error = {"code": INTERNAL_ERROR, "message": STOPPED}
        await anyio.to_thread.run_sync(lambda: self.store.settle(
            task.id, "failed", error=error, message=STOPPED))
        return await anyio.to_thread.run_sync(self.store.get, task.id, task.client) or task
