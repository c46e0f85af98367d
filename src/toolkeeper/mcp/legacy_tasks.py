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

A tool that asks its client something inside such a task leaves it ``input_required`` with
its questions in the store (``tasks.py``, as in input rounds); the client's ``tasks/result``,
on whichever replica, asks them on its own stream, each marked with the task, and records the
answers, with which the run goes on. On a connection that stays open the client is told each
change of status (``task_status.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata

from .legacy_rules import listed, tasks_client
from .offer_handlers import client_of
from .task_status import StatusNotices, legacy_task
from .task_store import TaskRecord
from .task_wire import ASKED, POLL_MS, TTL_MS, Asked, envelope
from .tasks import Tasks
from .wire import INTERNAL_ERROR, INVALID_PARAMS, NO_WAY_BACK

__all__ = ["CAPABILITY", "LEGACY", "LegacyTasks"]

LEGACY = "2025-11-25"
"""The one revision whose handshake declares tasks as a capability of their own."""

CAPABILITY: dict[str, Any] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
"""What the server declares as ``capabilities.tasks`` to a 2025-11-25 client."""

RELATED = "io.modelcontextprotocol/related-task"

Context = ServerRequestContext[Any, Any]


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
        self.notices = StatusNotices(tasks.store)
        self.asking: set[str] = set()
        """The tasks whose questions a ``tasks/result`` of this process is asking now."""

    async def __call__(self, ctx: Context, call_next: CallNext) -> HandlerResult:
        if ctx.method == "initialize":
            return _declared(await call_next(ctx))
        if ctx.protocol_version != LEGACY:
            return await call_next(ctx)
        if ctx.method == "tools/call":
            return await self._call(ctx, call_next)
        if ctx.method == "tools/list" and tasks_client(ctx):
            return listed(await call_next(ctx), lambda wire: self._waits(ctx, wire))
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
        if asked.task is None:
            return result
        group = self.tasks.group
        if group is not None and self.tasks.face.changes.told.tools_changed:
            group.start_soon(self.notices.follow, ctx.session, asked.task, client_of(ctx))
        return {"task": legacy_task(asked.task)}

    def _waits(self, ctx: Context, wire: str) -> bool:
        """Whether a call of the tool listed as ``wire`` may wait for a person."""
        name = self.tasks.face.exported.tool_name(wire)
        return name is not None and self.tasks.offered(ctx, name, "forbidden",
                                                         listing=True) == "optional"

    async def _get(self, ctx: Context) -> dict[str, Any]:
        return legacy_task(envelope(await self.tasks.find(ctx, _task_id(ctx.params))))

    async def _list(self, ctx: Context) -> dict[str, Any]:
        found = await anyio.to_thread.run_sync(self.tasks.store.list, client_of(ctx))
        checked = [await self.tasks.runners.checked(task) for task in found]
        return {"tasks": [legacy_task(envelope(task)) for task in checked]}

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
            if task.status == "input_required" and task.asked and task.id not in self.asking:
                await self._ask_client(ctx, task)
            else:
                await anyio.sleep(POLL_MS / 1000)
            task = await self.tasks.find(ctx, task_id)
        return _outcome(task)

    async def _ask_client(self, ctx: Context, task: TaskRecord) -> None:
        """What the task's tool asked (it waits in ``input_required``), asked of the client on
        this ``tasks/result``'s stream, each request marked with its task; the answers are
        the client's to the task, and its run goes on with them (on whichever replica)."""
        if not getattr(ctx.session, "can_send_request", True):
            raise MCPError(code=NO_WAY_BACK, message=(
                f"task {task.id!r} waits for the client's answers, but this connection cannot "
                "carry a request back to the client: use --sessions or stdio"))
        self.asking.add(task.id)
        try:
            answers = {key: await _asked(ctx, task.id, request)
                       for key, request in task.asked.items()}
        except Exception as exc:  # a client that failed to answer: the task says why
            said = f"the client could not answer the task's question: {exc}"
            await anyio.to_thread.run_sync(lambda: self.tasks.store.settle(
                task.id, "failed", error={"code": INTERNAL_ERROR, "message": said},
                message=said))
            return
        finally:
            self.asking.discard(task.id)
        await anyio.to_thread.run_sync(self.tasks.store.answer, task.id, task.client, answers)


_ASKS: dict[str, tuple[Any, Any]] = {
    "elicitation/create": (types.ElicitRequest, types.ElicitResult),
    "sampling/createMessage": (types.CreateMessageRequest, types.CreateMessageResult),
    "roots/list": (types.ListRootsRequest, types.ListRootsResult)}


async def _asked(ctx: Context, task_id: str, request: Mapping[str, Any]) -> dict[str, Any]:
    """``request`` (as the task stored it) sent to the client of ``ctx`` with the
    related-task mark; its answer as plain data."""
    kind, answer = _ASKS[str(request.get("method"))]
    params = dict(request.get("params") or {})
    params["_meta"] = {**(params.get("_meta") or {}), RELATED: {"taskId": task_id}}
    sent = kind.model_validate({**request, "params": params})
    found = await ctx.session.send_request(
        sent, answer, metadata=ServerMessageMetadata(related_request_id=ctx.request_id))
    dumped: dict[str, Any] = found.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


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
