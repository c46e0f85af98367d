"""Telling a 2025-11-25 client its task's status: ``notifications/tasks/status`` each time the
task it made changes (``working`` → ``input_required`` → ``working`` → ``completed``,
``failed`` or ``cancelled``; a new status message, such as where a person decides, too), on
the client's connection, when that connection stays open (stdio, HTTP with ``--sessions``).

The replica the client made the task on tells it: it hears at once of a change this process
made (the store's observers), and reads the store every poll for one another replica made (a
cancel sent there). The notifications are a courtesy the revision allows; ``tasks/get`` is
the truth, and a connection that cannot carry them ends the telling, not the task."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import anyio
import mcp_types as types

from .task_store import TaskRecord, TaskStore
from .task_wire import POLL_MS, envelope

__all__ = ["StatusNotices", "legacy_task"]


def legacy_task(task: Mapping[str, Any]) -> dict[str, Any]:
    """A task as 2025-11-25 writes it: the same fields, with ``ttl`` and ``pollInterval``
    (milliseconds) for the 2026-07-28 ``ttlMs`` and ``pollIntervalMs``."""
    out = {k: v for k, v in task.items() if k not in ("ttlMs", "pollIntervalMs")}
    out["ttl"] = task.get("ttlMs")
    if task.get("pollIntervalMs") is not None:
        out["pollInterval"] = task["pollIntervalMs"]
    return out


class StatusNotices:
    """The tasks of ``store`` whose clients are told of each change."""

    def __init__(self, store: TaskStore) -> None:
        self.store = store
        self._woken: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Event]] = {}
        store.observers.append(self._heard)

    def _heard(self, task_id: str) -> None:
        """A change this process made to ``task_id`` (from any thread): read it now."""
        found = self._woken.get(task_id)
        if found is not None:
            loop, event = found
            loop.call_soon_threadsafe(event.set)

    async def follow(self, session: Any, task: Mapping[str, Any], client: str) -> None:
        """Tell ``session``'s connection each change of ``task`` (as it was answered) until
        it is over, its TTL ends or the connection cannot hear it any more."""
        task_id = str(task["taskId"])
        seen = (task.get("status"), task.get("statusMessage"))
        event = asyncio.Event()
        self._woken[task_id] = (asyncio.get_running_loop(), event)
        try:
            while True:
                with anyio.move_on_after(POLL_MS / 1000):  # a change on another replica
                    await event.wait()
                event.clear()
                found = await anyio.to_thread.run_sync(self.store.get, task_id, client)
                if found is None:
                    return
                if (found.status, found.message) != seen:
                    seen = (found.status, found.message)
                    if not await _told(session, found):
                        return
                if found.terminal:
                    return
        finally:
            self._woken.pop(task_id, None)


async def _told(session: Any, task: TaskRecord) -> bool:
    """``notifications/tasks/status`` for ``task`` on the connection of ``session`` (not on
    a request's stream: the request that made the task was answered). False: it is closed."""
    params = types.TaskStatusNotificationParams.model_validate(legacy_task(envelope(task)))
    try:
        await session.send_notification(types.TaskStatusNotification(params=params))
    except Exception:  # a closed connection, or one with nowhere to put a notification
        return False
    return True
