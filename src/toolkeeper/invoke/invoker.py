"""``ToolInvoker``: the one door every model-originated call passes through."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from functools import partial
from typing import Any

import anyio

from ..approval.handlers import ApprovalHandler
from ..approval.models import args_digest
from ..approval.store import ApprovalStore
from ..artifacts.store import BlobStore
from ..core.call import ToolCall
from ..core.context import ToolContext
from ..errors import CallCancelledError, PolicyViolationError, UsageError
from ..guardrails.base import Guardrail
from ..hooks import HookEvent, HookManager
from ..toolbox.toolbox import as_toolbox
from ..tools.runner import run_coroutine_sync
from .audit import AuditEntry, AuditLog
from .gates import DEFAULT_GATES, execute
from .gates.errors import result_for
from .policy import ChainPolicy
from .results import ChainCallRecord, InvocationResult
from .session import InvokerSession
from .state import Gate, Invocation, Next, ProgressSink

__all__ = ["ToolInvoker"]

_MAX_CHAINS = 4096


class ToolInvoker:
    """Runs tool calls through a fixed, ordered tuple of gates folded around the executor.

    Args:
        registry: A ``Toolbox``, a view, or a plain list of tools.
        approval_handler: Who approves risky calls; without one, they are denied.
        artifact_store: Where large results and media go; without one, results stay inline.
        policy: Limits (``ChainPolicy`` defaults: 50 calls, 60 s per call, 300 s in total…).
        hooks: Lifecycle hooks (TOOL_START, TOOL_END, APPROVAL_*, ARTIFACT_STORED…).
        guardrails: Checks before and after execution.
        audit: Where every invocation is recorded.
        approval_store: The store ``resume`` reads approved requests from.
        gates: The pipeline, outer → inner (``DEFAULT_GATES``; the order is pinned by a test).
    """

    def __init__(
        self, registry: Any, approval_handler: ApprovalHandler | None = None,
        artifact_store: BlobStore | None = None, policy: ChainPolicy | None = None,
        hooks: HookManager | None = None, *, guardrails: Iterable[Guardrail] = (),
        audit: AuditLog | None = None, approval_store: ApprovalStore | None = None,
        gates: Sequence[Gate] = DEFAULT_GATES,
    ) -> None:
        self.registry = as_toolbox(registry)
        self.approval_handler = approval_handler
        self.artifact_store = artifact_store
        self.policy = policy or ChainPolicy()
        self.hooks = hooks
        self.guardrails = tuple(guardrails)
        self.audit = audit
        self.approval_store = approval_store or getattr(approval_handler, "store", None)
        self.gates = tuple(gates)
        self._chain = self._fold(self.gates)
        self._chains: dict[str, tuple[Any, Next]] = {}

    def _fold(self, gates: Sequence[Gate], tool: Any = None) -> Next:
        handler: Next = execute
        for gate in reversed(gates):
            if gate.active(self) and (tool is None or gate.needed(self, tool)):
                handler = partial(gate.__call__, call_next=handler)
        return handler

    def _chain_for(self, name: str) -> Next:
        """The chain for calls of ``name``: folded once per tool without the gates it cannot
        need; the full chain when the name is unknown (the lookup gate answers those)."""
        tool = self.registry.get(name) if name else None
        if tool is None:
            return self._chain
        cached = self._chains.get(name)
        if cached is not None and cached[0] is tool:
            return cached[1]
        if len(self._chains) >= _MAX_CHAINS:
            self._chains.clear()
        chain = self._fold(self.gates, tool)
        self._chains[name] = (tool, chain)
        return chain

    def open_session(self, *, session_id: str | None = None, chain: bool = False
                     ) -> InvokerSession:
        """A new session: its own budget, trace and pins. Use it with ``async with``."""
        return InvokerSession(self, session_id=session_id, chain=chain)

    async def invoke(
        self, call: ToolCall, *, session: InvokerSession, ctx: ToolContext | None = None,
        progress_sink: ProgressSink | None = None, _pre_approved: str | None = None,
    ) -> InvocationResult:
        """Run one call through every gate; always returns exactly one result.

        The session's trace gets a record and TOOL_START / TOOL_END fire on every outcome;
        cancellation of the caller propagates (after it is recorded).
        """
        if session.invoker is not self:
            raise UsageError("the session belongs to another invoker; open one with "
                             "invoker.open_session()")
        started = time.perf_counter()
        inv = Invocation(call=call, session=session, invoker=self, ctx=ctx,
                         progress_sink=progress_sink, arguments=call.arguments,
                         pre_approved=_pre_approved)
        if self.hooks is not None and self.hooks.has(HookEvent.TOOL_START):
            await self.hooks.dispatch(HookEvent.TOOL_START, {"tool": call.name, "call_id": call.id,
                                                             "session": session.id})
        result: InvocationResult | None = None
        try:
            result = await self._chain_for(call.name)(inv)
            return result
        finally:
            if result is None:  # the caller was cancelled: record it, then let it propagate
                result = result_for(inv, CallCancelledError(
                    f"the call to '{call.name}' was cancelled", tool_name=call.name))
                with anyio.CancelScope(shield=True):
                    await self._record(inv, result, started)
            else:
                await self._record(inv, result, started)

    async def _record(self, inv: Invocation, result: InvocationResult, started: float) -> None:
        duration = (time.perf_counter() - started) * 1000
        status = "timeout" if result.error_code == "timeout" else result.status
        record = ChainCallRecord(tool=inv.call.name, call_id=inv.call.id, status=status,
                                 duration_ms=round(duration, 3), error_code=result.error_code,
                                 arguments=inv.call.arguments)
        inv.session.record(record)
        if self.audit is not None:
            self.audit.record(AuditEntry(
                ts=time.time(), call_id=inv.call.id, session_id=inv.session.id,
                tool=inv.call.name, args_digest=record.args_digest, arguments=inv.call.arguments,
                status=status, error_code=result.error_code, duration_ms=duration,
                approval_id=result.approval_id or inv.pre_approved))
        if self.hooks is not None and self.hooks.has(HookEvent.TOOL_END):
            await self.hooks.dispatch(HookEvent.TOOL_END, {
                "tool": inv.call.name, "call_id": inv.call.id, "session": inv.session.id,
                "status": status, "duration_ms": duration, "error_code": result.error_code})

    def invoke_sync(self, call: ToolCall, *, session: InvokerSession | None = None,
                    ctx: ToolContext | None = None) -> InvocationResult:
        """``invoke`` from synchronous code. Without ``session``, the call gets a one-off
        session of its own (its budget and trace end with the call, and so do its artifact
        pins: open a session to keep offloaded results pinned)."""
        result: InvocationResult = run_coroutine_sync(self._invoke_in(call, session, ctx))
        return result

    async def _invoke_in(self, call: ToolCall, session: InvokerSession | None,
                         ctx: ToolContext | None) -> InvocationResult:
        if session is not None:
            return await self.invoke(call, session=session, ctx=ctx)
        async with self.open_session() as one_off:
            return await self.invoke(call, session=one_off, ctx=ctx)

    async def invoke_many(
        self, calls: Sequence[ToolCall], *, session: InvokerSession,
        progress_sink: ProgressSink | None = None,
    ) -> list[InvocationResult]:
        """Run a batch: concurrency-safe tools at once, unsafe ones one after another; results in
        call order; one bad call never fails the batch."""
        results: list[InvocationResult | None] = [None] * len(calls)
        unsafe = anyio.Lock()

        async def run(index: int, call: ToolCall) -> None:
            tool = self.registry.get(call.name)
            safe = tool is None or getattr(tool.metadata, "is_concurrency_safe", True)
            if safe:
                results[index] = await self.invoke(call, session=session,
                                                   progress_sink=progress_sink)
                return
            async with unsafe:
                results[index] = await self.invoke(call, session=session,
                                                   progress_sink=progress_sink)

        async with anyio.create_task_group() as group:
            for index, call in enumerate(calls):
                group.start_soon(run, index, call)
        return [r for r in results if r is not None]

    async def resume(self, approval_id: str, *, session: InvokerSession,
                     arguments: dict[str, Any] | None = None) -> InvocationResult:
        """Run an approved call exactly once.

        Refuses when the request is unknown, not decided, denied, already executed (its stored
        result is returned instead), or when ``arguments`` differ from the approved ones.
        """
        store = self.approval_store
        if store is None:
            raise UsageError("resume needs an approval store (PersistedApprovalHandler or "
                             "approval_store=)")
        stored = await anyio.to_thread.run_sync(store.get, approval_id)
        if stored is None:
            return InvocationResult(status="error", error_code="unknown_approval",
                                    text=f"no approval request {approval_id!r}")
        request = stored.request
        base = {"call_id": request.call_id, "tool": request.tool, "approval_id": approval_id}
        if arguments is not None and args_digest(arguments) != request.args_digest:
            error = PolicyViolationError(
                f"the arguments differ from the ones approved in {approval_id}; ask for a new "
                "approval", tool_name=request.tool)
            return InvocationResult(status="denied", text=error.message, error_code=error.code,
                                    **base)
        if stored.state == "pending":
            return InvocationResult(status="pending", error_code="pending", **base,
                                    text=f"request {approval_id} is still waiting for a decision")
        if stored.state in ("denied", "skipped", "timeout"):
            message = stored.decision.message if stored.decision else ""
            return InvocationResult(status="denied", error_code="denied", **base,
                                    text=f"request {approval_id} was {stored.state}. {message}")
        if not await anyio.to_thread.run_sync(store.claim, approval_id):
            done = await anyio.to_thread.run_sync(store.get, approval_id)
            summary = (done.result or {}) if done is not None else {}
            return InvocationResult(status="error", error_code="already_executed", **base,
                                    text=f"request {approval_id} was already executed"
                                    + (f": {summary.get('text', '')}" if summary else ""))
        call = ToolCall(id=request.call_id, name=request.tool, arguments=request.arguments)
        result = await self.invoke(call, session=session, _pre_approved=approval_id)
        await anyio.to_thread.run_sync(store.complete, approval_id, {
            "status": result.status, "text": result.text[:2000], "error_code": result.error_code})
        return result
