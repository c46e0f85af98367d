"""Risk and approval: calls above the unapproved-risk ceiling (or whose tool asks) need a yes.

The gate asks the ``ApprovalService`` it holds, under the call's own policy (``inv.policy``: a
session's over the invoker's — the ceiling, ``unapproved_tools`` and every wait come from it):
BLOCKING waits up to ``approval_timeout_s`` then the request expires (the call did not run;
made again, it asks anew); CONTINUE_ON_TIMEOUT waits
``hitl_timeout_seconds`` then approves and records that it did; FIRE_AND_CONTINUE announces the
request and proceeds. Without a handler every call that needs approval is denied.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping

import anyio

from ...approval.models import (
    SESSION_GRANT_S,
    ApprovalDecision,
    ApprovalRequest,
    args_digest,
    changed,
)
from ...approval.service import ApprovalService, ceiling, expired_text, may_ask, request_ttl
from ...core.context import ToolContext
from ...core.results import TextBlock, ToolResult
from ...core.risk import HitlMode, ToolRisk
from ...core.spec import ToolLike
from ...errors import (
    ApprovalDeniedError,
    ApprovalExpiredError,
    ApprovalPending,
    InvalidArgumentsError,
)
from ...tools.tool import Tool
from ..results import InvocationResult
from ..state import Gate, Invocation, Next

__all__ = ["NOTICE_S", "ApprovalGate"]

KEPT_STRUCTURED = 64 << 10
"""The largest structured result (as JSON) an approved run keeps to tell again."""

NOTICE_S = 2.0
"""How often a waiting call tells its client it still waits."""


class ApprovalGate(Gate):
    name = "approval"

    def __init__(self, service: ApprovalService, *, governed: bool = False) -> None:
        self.service = service
        self.governed = governed
        """Whether a policy gate decides before this one (any tool's call may then ask)."""

    def needed(self, tool: ToolLike) -> bool:
        # whether it asks depends on each call's policy (and, governed, on the policies)
        return self.governed or may_ask(tool)

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        tool, service, policy, chain = inv.known_tool, self.service, inv.policy, inv.session.chain
        trail = inv.approval
        if inv.pre_approved is not None and trail is not None and trail.run_with is not None:
            resumed = Edit(inv.pre_approved, inv.call.arguments, trail.run_with)
            return resumed.told(await call_next(resumed.applied(inv)))
        if inv.pre_approved is not None or not self._asks(inv):
            return await call_next(inv)
        # "approve for this client": this session's own, else one the store holds (given on
        # whichever worker or replica); a script's calls share their client's session id but
        # are not its own calls: they ask, as they always did
        granted = inv.session.grantor(inv.call.name)
        if granted is None and not chain:
            stored = await service.session_grant(inv.session.id, inv.call.name)
            granted = stored.approver if stored is not None else None
        if granted is not None:
            if trail is not None:
                trail.decided("approved", granted)
            return await call_next(inv)
        mode = tool.hitl_mode if tool.hitl_mode is not HitlMode.NONE else HitlMode.BLOCKING
        if service.handler is None and mode is not HitlMode.FIRE_AND_CONTINUE:
            raise ApprovalDeniedError(
                f"tool '{tool.name}' (risk {tool.risk.value}) needs approval and no approval "
                "handler is configured; configure one (e.g. AutoApprovalHandler) or raise "
                "policy.max_risk_unapproved", tool_name=tool.name)
        top = ceiling(policy, chain=chain)
        request = ApprovalRequest.for_call(
            call_id=inv.call.id, tool=inv.call.name, risk=tool.risk, hitl_mode=mode,
            arguments=inv.arguments, session_id=inv.session.id,
            reason=_why(inv, top, mode), timeout_s=request_ttl(policy, mode, tool,
                                  inv.decision.ttl() if inv.decision is not None else None))
        found = await service.find_open(request)
        if found is not None and found.state == "executing":
            raise ApprovalDeniedError(
                f"request {found.request.id} for '{tool.name}' with these arguments was already "
                "taken for execution (by another call, or by a replica that stopped while "
                "running it); it does not run twice — check its outcome before calling again",
                tool_name=tool.name, details={"approval_id": found.request.id})
        if trail is not None:  # from here on the call has a request: its audit row names it
            trail.id = found.request.id if found is not None else request.id
        if found is not None and found.state == "done":
            told = await service.replay(found.request.id)
            if told is not None:
                return self._told_again(inv, found.request, told)
        if found is not None and found.decision is not None:
            # decided while nobody waited: approved runs it (once), denied says why
            request, decision = found.request, found.decision
        else:
            request = found.request if found is not None else request
            asked = time.monotonic()
            decision = await self._decide(inv, request, mode, rejoin=found is not None)
            if trail is not None:
                trail.waited_s = time.monotonic() - asked
        if decision.outcome != "pending" and trail is not None:
            trail.decided(decision.outcome, decision.approver)
        if decision.outcome == "pending":
            raise ApprovalPending(
                f"tool '{tool.name}' is waiting for approval (request {request.id}): a person "
                f"must decide ({service.where(request.id)}). Call the same tool again with the "
                f"same arguments once a person has approved request {request.id}; it then runs "
                "once. Nothing ran yet.", request_id=request.id)
        if decision.outcome == "expired":
            raise ApprovalExpiredError(expired_text(tool.name, decision.message),
                                       tool_name=tool.name, details={"approval_id": request.id})
        if not decision.approved:
            why = decision.message or decision.outcome
            raise ApprovalDeniedError(f"the call to '{tool.name}' was not approved ({why}); do "
                                      "not retry it unless the user asks", tool_name=tool.name,
                                      details={"approval_id": request.id})
        run = inv.evolve(approval_id=request.id)
        edit = None if decision.arguments is None else \
            Edit(request.id, request.arguments, decision.arguments)
        if edit is not None:  # checked before the request is taken
            run = edit.applied(run)
        if not await service.take(request.id):  # the same call, waiting too, took it
            told = await service.result_of_run(request.id, policy.approval_timeout_s)
            if told is not None:
                return self._told_again(inv, request, told)
            raise ApprovalPending(
                f"request {request.id} for '{tool.name}' was approved and is being run by "
                "another call made the same way; it runs once. Call the same tool again with "
                "the same arguments to be told its result.", request_id=request.id)
        if decision.scope == "session":
            inv.session.grant(inv.call.name, SESSION_GRANT_S, approver=decision.approver)
        result = await call_next(run)
        if edit is not None:
            result = edit.told(result)
        await service.complete(request.id, _summary(result))
        return result

    def _asks(self, inv: Invocation) -> bool:
        """The policy gate's decision when there is one (allow or ask; a deny never gets
        here), else the default set applied here: above the ceiling, or the tool asks."""
        if inv.decision is not None:
            return inv.decision.outcome == "ask"
        return self.service.needs_approval(inv.known_tool, policy=inv.policy,
                                           chain=inv.session.chain)

    @staticmethod
    def _told_again(inv: Invocation, request: ApprovalRequest, told: Mapping[str, object]
                    ) -> InvocationResult:
        """The same call made again after its approved run: that run's result, not a second
        run (its first caller may have given up before the answer came)."""
        ago = max(0, round(time.time() - request.created_at))
        text = (f"{told.get('text', '')}\n[this is the result of request {request.id}, approved "
                f"and run for this same call (asked {ago} s ago); it does not run twice. Made "
                "again, the call asks a person anew.]")
        failed = told.get("status") != "ok"
        structured = told.get("structured")
        return InvocationResult(
            status="error" if failed else "ok", result=ToolResult.text_result(
                text, is_error=failed,
                structured_content=structured if isinstance(structured, dict) else None),
            call_id=inv.call.id, tool=inv.call.name, approval_id=request.id)

    async def _decide(self, inv: Invocation, request: ApprovalRequest, mode: HitlMode, *,
                      rejoin: bool) -> ApprovalDecision:
        """The service's decision; while it waits, the caller hears about it (below)."""
        ctx = inv.ctx
        if mode is HitlMode.FIRE_AND_CONTINUE or ctx is None or ctx.progress_sink is None:
            return await self.service.decide(request, mode, policy=inv.policy, rejoin=rejoin,
                                             call_id=inv.call.id)
        decision: ApprovalDecision | None = None
        failure: Exception | None = None
        async with anyio.create_task_group() as group:
            group.start_soon(self._tell_waiting, ctx, request)
            try:
                decision = await self.service.decide(request, mode, policy=inv.policy,
                                                     rejoin=rejoin, call_id=inv.call.id)
            except Exception as exc:  # raised as itself below, not inside a group
                failure = exc
            group.cancel_scope.cancel()
        if failure is not None:
            raise failure
        assert decision is not None
        return decision

    async def _tell_waiting(self, ctx: ToolContext, request: ApprovalRequest) -> None:
        """While the call waits: a progress notification every ``NOTICE_S`` (MCP clients
        that gave a progress token see it; it also keeps their request alive) naming the
        request and where a person decides."""
        message = (f"waiting for a person to approve '{request.tool}' (request {request.id}): "
                   f"{self.service.where(request.id)}")
        started = time.monotonic()
        while True:
            try:
                await ctx.report_progress(round(time.monotonic() - started, 1), None, message)
            except Exception:  # a client gone or one that takes no progress: stop telling
                return
            await anyio.sleep(NOTICE_S)


def _why(inv: Invocation, top: ToolRisk, mode: HitlMode) -> str:
    """Why a person is asked: the operator's asking policies, else the default set's
    reason (the risk above the ceiling, or the tool asks)."""
    decision, tool = inv.decision, inv.known_tool
    if decision is not None and not decision.by_default_set:
        asking = [p for p in decision.policies if p.where != "default"]
        return "; ".join(f"{p.describe()} asks" for p in asking)
    if tool.risk > top:
        return f"risk {tool.risk.value} is above {top.value}"
    return f"the tool asks ({mode.value})"


@dataclasses.dataclass(frozen=True, slots=True)
class Edit:
    """A person's edit of an approved call's arguments: ``asked`` what the request was for,
    ``arguments`` what runs instead."""

    request_id: str
    asked: Mapping[str, object]
    arguments: dict[str, object]

    def applied(self, inv: Invocation) -> Invocation:
        """The call as edited: its arguments validated against the tool's schema (a
        provider's tool takes them as they are), and its audit trail told the digest that
        runs and what changed."""
        tool = inv.known_tool
        try:
            checked = tool.validate_arguments(self.arguments) if isinstance(tool, Tool) \
                else self.arguments
        except InvalidArgumentsError as exc:
            raise InvalidArgumentsError(
                f"request {self.request_id} was approved with edited arguments that "
                f"'{tool.name}' does not take ({exc}); nothing ran, and this approval will "
                "not run: make the call with other arguments to have a person decide anew",
                tool_name=tool.name, details={"approval_id": self.request_id}) from None
        if inv.approval is not None:
            inv.approval.edit(args_digest(self.arguments), changed(self.asked, self.arguments))
        return inv.evolve(arguments=dict(checked), resolved=None)

    def told(self, result: InvocationResult) -> InvocationResult:
        """The result with a note the model reads first: a person changed the arguments
        before approving, which ones, and what ran (cut at 2,000 characters)."""
        keys = ", ".join(changed(self.asked, self.arguments)) or "none"
        shown = json.dumps(self.arguments, ensure_ascii=False, default=str)
        if len(shown) > 2000:
            shown = shown[:2000] + "…"
        note = TextBlock(text=f"[a person edited the arguments before approving request "
                              f"{self.request_id}; the call ran with the edited arguments, not "
                              f"the ones asked. Changed: {keys}. Ran with: {shown}]")
        shaped = result.result.model_copy(update={"content": (note, *result.result.content)})
        return dataclasses.replace(result, result=shaped)


def _summary(result: InvocationResult) -> dict[str, object]:
    """What an approved request keeps of its run: the status, the text (2,000 characters)
    and, when small, the structured result (a call made again is told it)."""
    structured = result.result.structured_content
    if structured is not None and len(json.dumps(structured, default=str)) > KEPT_STRUCTURED:
        structured = None
    return {"status": result.status, "text": result.text[:2000],
            "error_code": result.error_code, "structured": structured}
