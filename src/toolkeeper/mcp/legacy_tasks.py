"""MCP tasks in their 2025-11-25 form, on the same task store as the 2026-07-28 extension
(``tasks.py``), so any replica answers for a task another started.

There the server declares ``capabilities.tasks`` at the handshake; a client sends
``tools/call`` with ``params.task`` (the TTL it wants) and is answered with the task at once
(``CreateTaskResult``), then follows it with ``tasks/get``, ``tasks/result`` (which waits for
the end and answers with the call's result), ``tasks/list`` (its own tasks only) and
``tasks/cancel``. The SDK's server checks a legacy ``tools/call`` handler's result against
``CallToolResult``, which has no room for a task, and knows none of the ``tasks/*`` methods
on that revision: this server middleware (the SDK's own way to wrap a request, whose result it
takes as given) answers them, while the call itself still runs through the door once, in the
task's run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError

from .offer_handlers import client_of
from .task_store import TaskRecord
from .tasks import ASKED, POLL_MS, TTL_MS, Asked, Tasks, envelope
from .wire import INVALID_PARAMS

__all__ = ["CAPABILITY", "LEGACY", "LegacyTasks", "legacy_task"]

LEGACY = "2025-11-25"
"""The one revision whose handshake declares tasks as a capability of their own."""

CAPABILITY: dict[str, Any] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
"""What the server declares as ``capabilities.tasks`` to a 2025-11-25 client."""

RELATED = "io.modelcontextprotocol/related-task"

Context = ServerRequestContext[Any, Any]


def legacy_task(task: Mapping[str, Any]) -> dict[str, Any]:
    """A task as 2025-11-25 writes it: the same fields, with ``ttl`` and ``pollInterval``
    (milliseconds) for the 2026-07-28 ``ttlMs`` and ``pollIntervalMs``."""
    out = {k: v for k, v in task.items() if k not in ("ttlMs", "pollIntervalMs")}
    out["ttl"] = task.get("ttlMs")
    if task.get("pollIntervalMs") is not None:
        out["pollInterval"] = task["pollIntervalMs"]
    return out


def _task_id(params: Mapping[str, Any] | None) -> str:
    found = (params or {}).get("taskId")
    if not isinstance(found, str) or not found:
        raise MCPError(code=INVALID_PARAMS, message="params.taskId is required: the id "
                                                    "tools/call answered with")
    return found


def _asked_ttl(params: Mapping[str, Any] | None) -> int | None:
    """The TTL a task-augmented ``tools/call`` asks for (``None``: not a task request)."""
    task = (params or {}).get("task")
    if not isinstance(task, Mapping):
        return None
    ttl = task.get("ttl")
    return ttl if isinstance(ttl, int) and not isinstance(ttl, bool) and ttl > 0 else TTL_MS


class LegacyTasks:
    """Server middleware: tasks for 2025-11-25 clients, kept by ``tasks``."""

    def __init__(self, tasks: Tasks) -> None:
        self.tasks = tasks

    async def __call__(self, ctx: Context, call_next: CallNext) -> HandlerResult:
        if ctx.method == "initialize":
            return _declared(await call_next(ctx))
        if ctx.protocol_version != LEGACY:
            return await call_next(ctx)
        if ctx.method == "tools/call":
            return await self._call(ctx, call_next)
        answer = {"tasks/get": self._get, "tasks/result": self._result,
                  "tasks/list": self._list, "tasks/cancel": self._cancel}.get(ctx.method)
        return await call_next(ctx) if answer is None else await answer(ctx)

    async def _call(self, ctx: Context, call_next: CallNext) -> HandlerResult:
        ttl = _asked_ttl(ctx.params)
        if ttl is None:
            return await call_next(ctx)
        asked = Asked(ttl_ms=ttl)
        token = ASKED.set(asked)
        try:
            result = await call_next(ctx)
        finally:
            ASKED.reset(token)
        return result if asked.task is None else {"task": legacy_task(asked.task)}

    async def _get(self, ctx: Context) -> dict[str, Any]:
        return legacy_task(envelope(await self.tasks.find(ctx, _task_id(ctx.params))))

    async def _list(self, ctx: Context) -> dict[str, Any]:
        found = await anyio.to_thread.run_sync(self.tasks.store.list, client_of(ctx))
        return {"tasks": [legacy_task(envelope(task)) for task in found]}

    async def _cancel(self, ctx: Context) -> dict[str, Any]:
        task = await self.tasks.find(ctx, _task_id(ctx.params))
        if task.terminal:
            raise MCPError(code=INVALID_PARAMS, message=(
                f"cannot cancel task {task.id!r}: it is already {task.status}"))
        await self.tasks.end(task)
        return legacy_task(envelope(await self.tasks.find(ctx, task.id)))

    async def _result(self, ctx: Context) -> dict[str, Any]:
        """Wait for the task to end (while it lives: its TTL ends the wait too), then answer
        with the call's result, or its error."""
        task_id = _task_id(ctx.params)
        task = await self.tasks.find(ctx, task_id)
        while not task.terminal:
            await anyio.sleep(POLL_MS / 1000)
            task = await self.tasks.find(ctx, task_id)
        return _outcome(task)


def _outcome(task: TaskRecord) -> dict[str, Any]:
    related = {RELATED: {"taskId": task.id}}
    if task.status == "completed" and task.result is not None:
        meta = {**(task.result.get("_meta") or {}), **related}
        return {**task.result, "_meta": meta}
    if task.status == "failed" and task.error is not None:
        raise MCPError(code=int(task.error.get("code", INVALID_PARAMS)),
                       message=str(task.error.get("message")), data=task.error.get("data"))
    raise MCPError(code=INVALID_PARAMS, message=(
        f"task {task.id!r} was {task.status}: {task.message or 'it has no result'}"))


def _declared(result: HandlerResult) -> HandlerResult:
    """The handshake's answer, with ``capabilities.tasks`` when the client speaks 2025-11-25."""
    if not isinstance(result, dict) or result.get("protocolVersion") != LEGACY:
        return result
    capabilities = dict(result.get("capabilities") or {})
    capabilities["tasks"] = CAPABILITY
    return {**result, "capabilities": capabilities}
