"""``ToolInvoker``: the one door every model-originated call passes through."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from ..approval.handlers import ApprovalHandler
from ..approval.models import args_digest
from ..approval.service import ApprovalService
from ..approval.store import ApprovalStore
from ..artifacts.store import BlobStore
from ..core.call import ToolCall
from ..core.context import LIBRARY, Caller, ToolContext
from ..core.json import JsonObject
from ..core.results import ToolResult
from ..core.spec import ToolLike
from ..core.unset import UNSET, Unset
from ..errors import UsageError
from ..guardrails.base import Guardrail
from ..hooks import HookManager
from ..policy.engine import Policies
from ..toolbox.catalog import CatalogBase
from ..toolbox.toolbox import as_toolbox
from ..tools.runner import run_coroutine_sync
from ..tools.threads import on_asyncio
from .audit import AuditEntry, AuditLog, beside
from .batch import run_batch
from .bounds import bounded_call
from .builder import default_gates, with_extra_gates
from .gates import execute
from .holdings import Holdings
from .policy import ChainPolicy
from .results import Envelope, InvocationResult
from .session import InvokerSession
from .state import ApprovalTrail, Gate, Invocation, Next, ProgressSink
from .tracing import TracerSource

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

__all__ = ["ASYNCIO_ONLY", "ToolInvoker", "execute_tool_calls"]

ASYNCIO_ONLY = ("ToolInvoker.invoke runs on asyncio (anyio's asyncio backend), and this call came "
                "from another event loop or none; run it under asyncio.run(), "
                "anyio.run(..., backend='asyncio'), or call invoke_sync() from plain code")
"""What the door says when it is awaited outside asyncio (trio is not supported)."""

_MAX_CHAINS = 4096
_REFUSED = {"unknown": ("error", "unknown_approval"), "mismatch": ("denied", "policy_violation"),
            "pending": ("pending", "pending"), "denied": ("denied", "denied"),
            "expired": ("error", "expired"),
            "already_executed": ("error", "already_executed")}


class ToolInvoker:
    """A catalog plus a tuple of gates folded around the executor.

    Args:
        registry: A ``Toolbox``, a view, or a plain list of tools.
        approval_handler: Who approves risky calls; without one, they are denied.
        artifact_store: Where large results and media go; without one, results stay inline.
        policy: Limits (``ChainPolicy`` defaults: 50 calls, 60 s per call, 300 s in total…).
        hooks: Lifecycle hooks (TOOL_START, TOOL_END, APPROVAL_*, ARTIFACT_STORED…).
        guardrails: Checks before and after execution.
        audit: Where every invocation is recorded. Left unset: beside a persisted approval
            store (a SQLite file's or PostgreSQL's, the handler's or ``approval_store``), in
            the same database, so ``toolkeeper audit`` with the options that reach the store
            lists the calls; no audit log with a store in memory or none. ``None``: none.
        approval_store: The store ``resume`` reads approved requests from.
        gates: The pipeline, outer → inner; by default ``builder.default_gates`` built from the
            arguments above (the order is ``builder.GATE_ORDER``, pinned by a test).
        extra_gates: Gates added to that pipeline, each where it says (its ``after`` or
            ``before``: ``class Redact(Gate): name = "redact"; after = "validate"``).
        tracer_provider: Where each call's OpenTelemetry span goes (``execute_tool {tool}``);
            by default the global provider, and no span at all while none is set up.
        page_url: Where a person decides (an approval page's URL): a waiting call's messages
            name its card there (``ApprovalService.where``).
        policies: Cedar policies and stored rules over the default set (``Policies``): each
            call is allowed, asked or denied by them before approval. Without them the default
            set alone decides (``[security]``: the risk ceiling, ``unapproved_tools``, a tool's
            own HITL mode).
    """

    def __init__(
        self, registry: CatalogBase | Iterable[object], approval_handler: ApprovalHandler | None = None,
        artifact_store: BlobStore | None = None, policy: ChainPolicy | None = None,
        hooks: HookManager | None = None, *, guardrails: Iterable[Guardrail] = (),
        audit: AuditLog | Unset | None = UNSET, approval_store: ApprovalStore | None = None,
        gates: Sequence[Gate] | None = None, extra_gates: Iterable[Gate] = (),
        tracer_provider: TracerProvider | None = None, page_url: str | None = None,
        policies: Policies | None = None,
    ) -> None:
        self.registry = as_toolbox(registry)
        self.policy = policy or ChainPolicy()
        self.artifact_store = artifact_store
        self.holdings = Holdings()
        """Which artifacts each owner's sessions hold: a ``{"$artifact": ref}`` resolves only
        for its owner (``InvokerSession.holds``)."""
        self.approvals = ApprovalService(approval_handler, store=approval_store, hooks=hooks,
                                         page_url=page_url)
        self.audit = beside(self.approvals.store) if audit is UNSET else audit
        self.tracing = TracerSource(tracer_provider)
        """Where the calls' spans (and a code-mode run's) come from."""
        pipeline = tuple(gates) if gates is not None else default_gates(
            catalog=self.registry, approvals=self.approvals,
            artifact_store=artifact_store, hooks=hooks, guardrails=guardrails, audit=self.audit,
            tracing=self.tracing, policies=policies)
        self.policies = policies
        """The policies the door decides with (``None``: the default set alone)."""
        self.gates = with_extra_gates(pipeline, extra_gates)
        self._unknown = self._fold(None)
        self._chains: dict[tuple[str, bool, bool], tuple[ToolLike, Next]] = {}

    def _fold(self, tool: ToolLike | None, *, ctx: bool = True, sink: bool = True) -> Next:
        """The gates folded around the executor, without those ``tool`` cannot need (nor those
        that need a ``ToolContext`` or a progress sink the call does not carry: ``ctx``,
        ``sink``); for an unknown name (``tool`` is ``None``) only the gates up to the lookup,
        which reports it."""
        gates = self.gates
        if tool is None:  # up to the gate that answers an unknown name
            ends = [i for i, g in enumerate(gates) if g.ends_unknown]
            gates = gates[: ends[0] + 1] if ends else gates
        carried = {"ctx": ctx, "progress_sink": sink, None: True}
        handler: Next = execute
        for gate in reversed(gates):
            if gate.active() and carried[gate.only_with] and (tool is None or gate.needed(tool)):
                handler = partial(gate.__call__, call_next=handler)
        return handler

    def _chain(self, name: str, tool: ToolLike | None, ctx: bool, sink: bool) -> Next:
        """The chain for calls of ``tool``: folded once per tool (and per whether calls carry a
        context and a progress sink) without the gates they cannot need (an unknown name gets
        the chain that reports it)."""
        if tool is None:
            return self._unknown
        key = (name, ctx, sink)
        cached = self._chains.get(key)
        if cached is not None and cached[0] is tool:
            return cached[1]
        if len(self._chains) >= _MAX_CHAINS:
            self._chains.clear()
        chain = self._fold(tool, ctx=ctx, sink=sink)
        self._chains[key] = (tool, chain)
        return chain

    def open_session(self, *, session_id: str | None = None, chain: bool = False,
                     trace_limit: int | None = None, policy: ChainPolicy | None = None,
                     caller: Caller = LIBRARY) -> InvokerSession:
        """A new session: its own budget, trace and pins. Use it with ``async with``.
        ``trace_limit`` keeps only the last N trace records (``DEFAULT_TRACE_LIMIT``, 10,000,
        unless given; ``session.trace_dropped`` counts the older ones it let go);
        ``policy`` gives it limits of its own instead of the invoker's (a code-mode run's);
        ``caller`` says who makes its calls (the MCP server's client, …)."""
        return InvokerSession(self, session_id=session_id, chain=chain, trace_limit=trace_limit,
                              policy=policy, caller=caller)

    async def invoke(
        self, call: ToolCall, *, session: InvokerSession, ctx: ToolContext | None = None,
        progress_sink: ProgressSink | None = None, _pre_approved: ApprovalTrail | None = None,
    ) -> InvocationResult:
        """Run one call through every gate; always returns exactly one result.

        The tool is looked up once; the session's trace gets a record and TOOL_START /
        TOOL_END fire on every outcome; cancellation of the caller propagates (after it is
        recorded).
        """
        if session.invoker is not self:
            raise UsageError("the session belongs to another invoker; open one with "
                             "invoker.open_session()")
        if not on_asyncio():
            raise UsageError(ASYNCIO_ONLY)
        # A malformed call (arguments past the door's bounds included: they would not fit the
        # audit log) takes the chain that ends at the lookup, which reports its problem.
        call = bounded_call(call, session.policy)
        tool = self.registry.get(call.name) if call.name and call.problem is None else None
        if tool is not None and ((session.tools is not None and call.name not in session.tools)
                                 or not (ctx.caller if ctx else session.caller).may_use(call.name)):
            tool = None  # known, but not this session's or caller's: the lookup gate refuses it
        trail = _pre_approved or ApprovalTrail()
        inv = Invocation(call, session, session.policy, tool, call.arguments, ctx,
                         progress_sink, pre_approved=trail.id, approval=trail)
        return await self._chain(call.name, tool, ctx is not None, progress_sink is not None)(inv)

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
            if tool is None or tool.metadata.is_concurrency_safe:
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

    def execute_tool_calls(
        self, calls: Sequence[ToolCall] | object, api_format: str | None = None, *,
        session: InvokerSession | None = None, catalog: CatalogBase | None = None,
    ) -> list[ToolResult] | list[JsonObject]:
        """Run model-originated calls through this door and return the results, from
        synchronous code.

        Given ``ToolCall``s, returns ``ToolResult``s in call order. Given a provider response (or
        its list of call dicts) and its ``api_format``, parses it with the names of ``catalog``
        (the one this door serves unless another view of it is given) and returns the
        provider's tool-result messages, ready to append to the conversation.
        Concurrency-safe tools run at once, others one after another.

        Raises:
            UsageError: provider call dicts (or anything else but ``ToolCall``s) without
                ``api_format``; the message names the item and the fix.
        """
        return run_batch(self, catalog or self.registry, calls, api_format, session)

    async def resume(self, approval_id: str, *, session: InvokerSession,
                     arguments: dict[str, object] | None = None) -> InvocationResult:
        """Run an approved call exactly once, through this door.

        Refuses when the request is unknown, not decided, denied, already executed (its stored
        result is returned instead), or when ``arguments`` differ from the approved ones.
        """
        if self.approvals.store is None:
            raise UsageError("resume needs an approval store (PersistedApprovalHandler or "
                             "approval_store=)")
        claim = await self.approvals.claim(approval_id, arguments)
        request = claim.request
        envelope: Envelope = {"call_id": request.call_id if request else "",
                              "tool": request.tool if request else "", "approval_id": approval_id}
        if claim.refusal is not None or request is None:
            status, code = _REFUSED[claim.refusal or "unknown"]
            if claim.refusal == "mismatch" and request is not None and self.audit is not None:
                await anyio.to_thread.run_sync(self.audit.record, AuditEntry(
                    ts=time.time(), call_id=request.call_id, session_id=session.id,
                    tool=request.tool, args_digest=args_digest(arguments),
                    arguments=arguments or {}, status=status, error_code=code, duration_ms=0.0,
                    approval_id=approval_id, decision="refused: arguments differ from the "
                    "approved ones"))
            return InvocationResult.failed(status, claim.message, code,  # type: ignore[arg-type]
                                           **envelope)
        call = ToolCall(id=request.call_id, name=request.tool, arguments=request.arguments)
        trail = ApprovalTrail(id=approval_id)
        if claim.decision is not None:
            trail.decided(claim.decision.outcome, claim.decision.approver)
            trail.run_with = claim.decision.arguments
        result = await self.invoke(call, session=session, _pre_approved=trail)
        await self.approvals.complete(approval_id, {
            "status": result.status, "text": result.text[:2000], "error_code": result.error_code})
        return result


def execute_tool_calls(
    catalog: CatalogBase, calls: Sequence[ToolCall] | object, api_format: str | None = None, *,
    invoker: ToolInvoker | None = None, session: InvokerSession | None = None,
) -> list[ToolResult] | list[JsonObject]:
    """``catalog.execute_tool_calls``: the calls through ``invoker``, else through a door over
    ``catalog`` with no approval handler (SAFE and SENSITIVE calls run, HIGH and CRITICAL ones
    are denied)."""
    door = invoker or ToolInvoker(catalog)
    return door.execute_tool_calls(calls, api_format, session=session, catalog=catalog)
