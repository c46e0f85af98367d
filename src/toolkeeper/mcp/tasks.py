"""MCP tasks (the ``io.modelcontextprotocol/tasks`` extension): a call of a tool that declares
task support, from a client that declares the extension, is answered at once with a task —
its id, status and TTL — and runs on in the server; the client polls ``tasks/get`` for its
status and, once it is over, its result (or its protocol error), answers what the tool asks
with ``tasks/update`` and stops it with ``tasks/cancel``.

Each run of the tool is one pass through the door, as any call (``MCPFace.one_pass``): a
tool that asks the client something parks the task in ``input_required`` with the questions
(``inputRequests``), and runs again from the start with the answers, as a call does in input
rounds. The task's state is in the store (``TaskStore``), so a replica answers for a task
another runs; the replica that runs it sees a cancel or an answer made elsewhere within a
poll. A tool declared ``task_start="tool"`` runs as a plain call until it says
``ctx.as_task()``: what it asked before is asked in input rounds, and from there it is a
task (the call is answered with it while the tool goes on)."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

from ..approval.handlers import Releases
from ..approval.models import ApprovalDecision, duration
from ..approval.service import Tasked, tasked
from ..core.call import ToolCall
from ..hooks import HookEvent
from ..invoke.invoker import ToolInvoker
from ..invoke.results import InvocationResult
from ..invoke.session import InvokerSession
from ..toolbox.catalog import CatalogBase
from .changes import Changes
from .client_link import MCPClientLink, answers_of
from .exported import Exported
from .legacy_rules import may_wait, offered, refusal, tasks_client
from .offer_handlers import client_of
from .page_link import waiting_call
from .task_runners import STOPPED, Runners
from .task_store import TaskRecord, TaskStore
from .task_wire import (
    ASKED,
    EXTENSION,
    POLL_MS,
    TTL_MS,
    Asked,
    TaskParams,
    UpdateParams,
    as_asked,
    declared,
    detailed,
    dumped,
    envelope,
    store_of,
    task_support,
)
from .wire import INTERNAL_ERROR, INVALID_PARAMS, MISSING_CAPABILITY, NO_WAY_BACK, Ctx, modern

__all__ = ["ASKED", "EXTENSION", "POLL_MS", "TTL_MS", "Asked", "TaskFace", "TaskParams", "Tasks",
           "UpdateParams", "declared", "envelope", "store_of", "task_support"]

Outcome = InvocationResult | str | None
logger = logging.getLogger(__name__)


class TaskFace(Protocol):
    """What tasks need of the MCP face: a link to the client of a request, one pass of a
    call through the door, and a finished call's result as MCP renders it."""

    def link(self, ctx: Ctx, call: ToolCall, answers: dict[str, Any]) -> MCPClientLink: ...

    async def one_pass(self, ctx: Ctx, call: ToolCall, link: MCPClientLink, *,
                       tasked: bool = False) -> Outcome: ...

    def session_for(self, ctx: Ctx) -> InvokerSession: ...

    @property
    def invoker(self) -> ToolInvoker: ...

    def rendered(self, call: ToolCall, outcome: InvocationResult) -> dict[str, Any]: ...

    async def answer(self, call: ToolCall, outcome: Outcome, link: MCPClientLink,
                     answers: dict[str, Any]) -> Any: ...

    @property
    def catalog(self) -> CatalogBase: ...

    @property
    def changes(self) -> Changes: ...

    @property
    def exported(self) -> Exported: ...


@dataclass
class _Start:
    """A tool-started call: what its first pass ended with, or the task it became."""

    changed: anyio.Event = field(default_factory=anyio.Event)
    task: TaskRecord | None = None
    outcome: Outcome = None
    link: MCPClientLink | None = None
    error: Exception | None = None
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    """The run's: its request cancels it until it is a task; then ``tasks/cancel`` does."""


class Tasks:
    """The tasks of one MCP face: their state in ``store``, their runs in ``group`` (the
    face's lifespan opens it; without one, calls are answered as plain calls)."""

    def __init__(self, store: TaskStore, face: TaskFace) -> None:
        self.store, self.face = store, face
        self.runners = Runners(store)
        """This process's number on the store (each task names its own) and its heartbeat."""
        self.group: TaskGroup | None = None
        self.running: dict[str, anyio.CancelScope] = {}
        """The runs of this replica's tasks, by task id (a cancel stops them)."""
        self.people: dict[str, Callable[[dict[str, Any]], Awaitable[None]]] = {}
        """By call id: what a call does when it waits for a person (becomes a task, or its
        task says so)."""
        face.invoker.approvals.hooks.register(HookEvent.APPROVAL_REQUESTED,
                                              self._approval_requested)

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """The face's lifespan: the tasks run in its task group, cancelled as it ends."""
        async with anyio.create_task_group() as group:
            await self.runners.start(group)
            self.group = group
            try:
                yield
            finally:
                self.group = None
                group.cancel_scope.cancel()

    def serve_on(self, server: Server[Any]) -> None:
        """Declare the extension on ``server`` and answer its methods there."""
        server.extensions[EXTENSION] = {}
        server.add_request_handler("tasks/get", TaskParams, self.get)
        server.add_request_handler("tasks/update", UpdateParams, self.update)
        server.add_request_handler("tasks/cancel", TaskParams, self.cancel)

    # -- tools/call ---------------------------------------------------------------------

    async def call(self, ctx: Ctx, call: ToolCall, params: Any) -> Any | None:
        """The answer to a ``tools/call`` that is (or may become) a task, or ``None``: a
        plain call."""
        support, start = task_support(self.face.catalog, call.name)
        asked = ASKED.get()  # 2025-11-25: the call itself asks to be a task
        if not modern(ctx):  # as the client was told (``legacy_rules.listed``)
            support = self.offered(ctx, call.name, support)
        refused = None if modern(ctx) else refusal(call.name, support, asked is not None)
        if refused is not None:
            raise refused
        tasks_client = (declared(ctx) and modern(ctx)) or asked is not None
        if support == "required" and not tasks_client:
            raise MCPError(code=MISSING_CAPABILITY, message=(
                f"tool {call.name!r} runs only as a task: declare the {EXTENSION!r} "
                "extension in the client's capabilities"),
                data={"requiredCapabilities": {"extensions": {EXTENSION: {}}}})
        if not tasks_client or self.group is None:
            return None
        answers = answers_of(params)
        if asked is None and (support == "forbidden" or start == "tool"):
            return await self._tool_started(ctx, call, answers)  # a task once a person must
        task = await self._create(client_of(ctx), call)
        self.group.start_soon(self._run, ctx, call, task, answers)
        return as_asked(asked, {"resultType": "task", **envelope(task)})

    def offered(self, ctx: Ctx, name: str, support: str, *, listing: bool = False) -> str:
        """The task support of tool ``name`` the 2025-11-25 client of ``ctx`` is listed
        (``listing``), or its call is held to (never less than it was listed)."""
        if support != "forbidden" or not tasks_client(ctx):
            return support
        waits = may_wait(self.face.invoker, self.face.session_for(ctx),
                         self.face.catalog.get(name), exactly=listing)
        return offered(support, waits)

    async def _create(self, client: str, call: ToolCall, message: str | None = None,
                      approval: str | None = None) -> TaskRecord:
        asked = ASKED.get()
        ttl = TTL_MS if asked is None else max(1, min(asked.ttl_ms, TTL_MS))
        task = TaskRecord(id="task_" + secrets.token_urlsafe(12), client=client,
                          tool=call.name, ttl_ms=ttl, message=message, approval=approval,
                          process=self.runners.number)
        await anyio.to_thread.run_sync(self.store.create, task)
        return task

    async def _tool_started(self, ctx: Ctx, call: ToolCall, answers: dict[str, Any]) -> Any:
        start = _Start()
        assert self.group is not None
        self.group.start_soon(self._first_pass, ctx, call, answers, start)
        try:
            await start.changed.wait()
        finally:  # a request cancelled (its client gave up or left) cancels a call not a task
            if start.task is None:
                start.scope.cancel()
        if start.task is not None:
            return {"resultType": "task", **envelope(start.task)}
        if start.error is not None:
            raise start.error
        assert start.link is not None
        return await self.face.answer(call, start.outcome, start.link, answers)

    async def _first_pass(self, ctx: Ctx, call: ToolCall, answers: dict[str, Any],
                          start: _Start) -> None:
        link = self.face.link(ctx, call, answers)
        scope, watching = start.scope, anyio.CancelScope()

        async def as_task(message: str | None = None, approval: str | None = None) -> None:
            if start.task is None:
                start.task = await self._create(client_of(ctx), call, message, approval)
                link.quiet = True  # its request is answered: nothing more goes to it
                self.running[start.task.id] = scope
                self._watched(start.task, scope, watching)  # a cancel on another replica
                start.changed.set()
            elif approval is not None and message is not None:
                start.task.approval = approval  # what its expiry withdraws
                await anyio.to_thread.run_sync(self.store.waits_for, start.task.id, approval,
                                               message)

        async def person(request: dict[str, Any]) -> None:
            await as_task(*self._person(request))

        link.as_task = as_task  # type: ignore[attr-defined]
        self.people[call.id] = person
        try:
            with scope, tasked(Tasked(call_id=call.id, rejoined=person)):
                outcome = await self.face.one_pass(ctx, call, link, tasked=True)
                if start.task is not None:
                    outcome = await self._decided(ctx, outcome)
        except Exception as exc:
            if start.task is None:  # the request that waits raises it
                start.error = exc
                start.changed.set()
                return
            await self._fail(start.task, INTERNAL_ERROR, f"the task failed: {exc}")
            return
        except anyio.get_cancelled_exc_class():  # the server stops (its task group ends)
            if start.task is not None:
                await self._fail(start.task, INTERNAL_ERROR, STOPPED)
            raise
        finally:
            watching.cancel()
            self.people.pop(call.id, None)
            if start.task is not None:
                self.running.pop(start.task.id, None)
        if scope.cancelled_caught:
            return
        if start.task is None:
            start.outcome, start.link = outcome, link
            start.changed.set()
            return
        await self._settle(start.task, call, outcome, link)

    # -- a person's decision ------------------------------------------------------------

    async def _approval_requested(self, _event: HookEvent, payload: dict[str, Any]) -> None:
        """A call waits for a person: its task says so (a call not yet a task becomes one)."""
        request = payload.get("request") or {}
        told = waiting_call(self.people, request)  # a script's call: its client's call
        if told is not None:
            await told(request)

    def _person(self, request: dict[str, Any]) -> tuple[str, str]:
        """What a task waiting on approval request ``request`` says, and the request's id."""
        approval = str(request.get("id"))
        where = self.face.invoker.approvals.where(approval)
        return (f"a person must decide whether {request.get('tool')!r} may run "
                f"(request {approval}): {where}", approval)

    async def _decided(self, ctx: Ctx, outcome: Outcome) -> Outcome:
        """A pass that stopped waiting for a person (``pending``: a task's call waits as long
        as its request lives, so its run was approved to another call made the same way): once
        the person decided, the call runs once if approved; denied and expired are their own
        outcomes. ``None``: the server is stopping (its waits were released)."""
        store = self.face.invoker.approvals.store
        handler: object = self.face.invoker.approvals.handler  # an optional ability
        if store is None or not isinstance(outcome, InvocationResult) or \
                outcome.status != "pending" or not outcome.approval_id:
            return outcome
        if isinstance(handler, Releases) and handler.released:
            return None
        approval = outcome.approval_id
        while True:
            found = await anyio.to_thread.run_sync(store.get, approval)
            if found is None or found.state != "pending":
                break
            expires = found.request.expires_at
            if expires is not None and time.time() >= expires:  # as the service records it
                await anyio.to_thread.run_sync(store.decide, ApprovalDecision(
                    request_id=approval, outcome="expired", message="nobody decided within "
                    f"{duration(expires - found.request.created_at)}"))
                continue
            await anyio.sleep(POLL_MS / 1000)
        return await self.face.invoker.resume(approval, session=self.face.session_for(ctx))

    async def _withdraw(self, task: TaskRecord,
                        why: str = "withdrawn: the client cancelled its task") -> None:
        """A cancelled (or expired) task's approval request, still waiting, is withdrawn
        (denied on the client's behalf, saying ``why``): nobody is asked about a call nobody
        waits for."""
        store = self.face.invoker.approvals.store
        if store is None or task.approval is None:
            return
        found = await anyio.to_thread.run_sync(store.get, task.approval)
        if found is not None and found.state == "pending":
            await anyio.to_thread.run_sync(store.decide, ApprovalDecision(
                request_id=task.approval, outcome="denied", approver=f"client:{task.client}",
                message=why))

    # -- a task's run -------------------------------------------------------------------

    async def _run(self, ctx: Ctx, call: ToolCall, task: TaskRecord,
                   answers: dict[str, Any]) -> None:
        self.running[task.id] = scope = anyio.CancelScope()
        try:
            with scope:
                async with anyio.create_task_group() as watching:
                    watching.start_soon(self._watch, task, scope)
                    await self._rounds(ctx, call, task, answers)
                    watching.cancel_scope.cancel()
        except Exception as exc:
            await self._fail(task, INTERNAL_ERROR, f"the task failed: {exc}")
        except anyio.get_cancelled_exc_class():  # the server stops (its task group ends)
            await self._fail(task, INTERNAL_ERROR, STOPPED)
            raise
        finally:
            self.running.pop(task.id, None)

    async def _rounds(self, ctx: Ctx, call: ToolCall, task: TaskRecord,
                      answers: dict[str, Any]) -> None:
        async def person(request: dict[str, Any]) -> None:
            message, approval = self._person(request)
            task.approval = approval  # what its expiry withdraws
            await anyio.to_thread.run_sync(self.store.waits_for, task.id, approval, message)

        self.people[call.id] = person
        try:
            with tasked(Tasked(call_id=call.id, rejoined=person)):
                await self._round_after_round(ctx, call, task, answers)
        finally:
            self.people.pop(call.id, None)

    async def _round_after_round(self, ctx: Ctx, call: ToolCall, task: TaskRecord,
                                 answers: dict[str, Any]) -> None:
        while True:
            link = self.face.link(ctx, call, answers)
            link.quiet = True  # 2025-11-25 asks in rounds too where tasks/result can ask:
            link.rounds = link.rounds or self.face.changes.told.tools_changed
            outcome = await self._decided(ctx, await self.face.one_pass(ctx, call, link,
                                                                        tasked=True))
            if not (link.asked and not link.missing and not link.unreachable):
                await self._settle(task, call, outcome, link)
                return
            asked = {key: dumped(request) for key, request in link.asked.items()}
            await anyio.to_thread.run_sync(self.store.ask, task.id, asked,
                                           "waiting for the client's answers")
            found = await self._answered(task)
            if found is None:
                return
            answers = {**answers, **found}

    async def _answered(self, task: TaskRecord) -> dict[str, Any] | None:
        """The client's answers once every question is answered (``None``: the task ended)."""
        while True:
            found = await anyio.to_thread.run_sync(self.store.get, task.id, task.client)
            if found is None or found.terminal:
                return None
            if found.status != "input_required":
                await anyio.to_thread.run_sync(self.store.resume, task.id)
                return found.answers
            await anyio.sleep(POLL_MS / 1000)

    def _watched(self, task: TaskRecord, scope: anyio.CancelScope,
                 watching: anyio.CancelScope) -> None:
        """Watch ``task`` beside its run (``_watch``) until ``watching`` is cancelled."""
        async def watch() -> None:
            with watching:
                try:
                    await self._watch(task, scope)
                except Exception:  # a store that failed to withdraw: the others run on
                    logger.warning("watching task %s failed", task.id, exc_info=True)

        if self.group is not None:
            self.group.start_soon(watch)

    async def _watch(self, task: TaskRecord, scope: anyio.CancelScope) -> None:
        """Stop the run when its task ended elsewhere (cancelled on another replica), or its
        TTL did: then the approval request it waits on is withdrawn, as by a cancel."""
        while True:
            await anyio.sleep(POLL_MS / 1000)
            try:
                found = await anyio.to_thread.run_sync(self.store.get, task.id, task.client)
            except Exception:  # the store is away for a moment: the next poll reads again
                logger.warning("could not read task %s", task.id, exc_info=True)
                continue
            if found is None or found.terminal:
                scope.cancel()
                if found is None:
                    with anyio.CancelScope(shield=True):
                        await self._withdraw(task, "withdrawn: the client's task expired "
                                                   "(its TTL ended) before a person decided")
                return

    async def _settle(self, task: TaskRecord, call: ToolCall, outcome: Outcome,
                      link: MCPClientLink) -> None:
        if link.missing:
            await self._fail(task, MISSING_CAPABILITY, (
                f"tool {call.name!r} needs the client capabilities {sorted(link.missing)}; "
                "declare them"), {"requiredCapabilities": link.missing})
        elif link.unreachable:
            await self._fail(task, NO_WAY_BACK, link.unreachable)
        elif not isinstance(outcome, InvocationResult):
            await self._fail(task, INTERNAL_ERROR, STOPPED)
        else:
            result = types.CallToolResult.model_validate(self.face.rendered(
                call, outcome)).model_dump(by_alias=True, mode="json", exclude_none=True)
            await anyio.to_thread.run_sync(lambda: self.store.settle(
                task.id, "completed", result=result))

    async def _fail(self, task: TaskRecord, code: int, message: str,
                    data: Any = None) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(lambda: self.store.settle(
                task.id, "failed", error=error, message=message))

    # -- tasks/get, tasks/update, tasks/cancel ------------------------------------------

    async def _owned(self, ctx: Ctx, task_id: str) -> TaskRecord:
        if not declared(ctx):
            raise MCPError(code=MISSING_CAPABILITY, message=(
                f"tasks are an extension: declare {EXTENSION!r} in the client's capabilities"),
                data={"requiredCapabilities": {"extensions": {EXTENSION: {}}}})
        return await self.find(ctx, task_id)

    async def find(self, ctx: Ctx, task_id: str) -> TaskRecord:
        """The task ``task_id`` of the client of ``ctx`` (another's, or one past its TTL,
        is no task of this client's: an invalid-params error says so)."""
        found = await anyio.to_thread.run_sync(self.store.get, task_id, client_of(ctx))
        if found is None:
            raise MCPError(code=INVALID_PARAMS, message=(
                f"no task {task_id!r}: it is not this client's, or its TTL is over"))
        return await self.runners.checked(found)  # its process lost: it ended with it

    async def get(self, ctx: Ctx, params: TaskParams) -> dict[str, Any]:
        return {"resultType": "complete", **detailed(await self._owned(ctx, params.task_id))}

    async def update(self, ctx: Ctx, params: UpdateParams) -> dict[str, Any]:
        task = await self._owned(ctx, params.task_id)
        await anyio.to_thread.run_sync(self.store.answer, task.id, task.client,
                                       params.input_responses)
        return {"resultType": "complete"}

    async def cancel(self, ctx: Ctx, params: TaskParams) -> dict[str, Any]:
        await self.end(await self._owned(ctx, params.task_id))
        return {"resultType": "complete"}

    async def end(self, task: TaskRecord) -> None:
        """Cancel ``task`` (its run stops, its approval request is withdrawn)."""
        if not task.terminal:
            await anyio.to_thread.run_sync(lambda: self.store.settle(
                task.id, "cancelled", message="cancelled by the client"))
            scope = self.running.get(task.id)
            if scope is not None:
                scope.cancel()
            await self._withdraw(task)
