"""Risk and approval: calls above the unapproved-risk ceiling (or whose tool asks) need a yes.

BLOCKING waits up to ``approval_timeout_s`` then denies; CONTINUE_ON_TIMEOUT waits
``hitl_timeout_seconds`` then approves and records that it did; FIRE_AND_CONTINUE announces the
request and proceeds. Without a handler every call that needs approval is denied.
"""

from __future__ import annotations

from typing import Any

import anyio

from ...approval.models import ApprovalDecision, ApprovalRequest
from ...core.risk import HitlMode, ToolRisk
from ...errors import ApprovalDeniedError, ApprovalPending
from ...hooks import HookEvent
from ..results import InvocationResult
from ..state import Gate, Invocation, Next

__all__ = ["ApprovalGate"]


def _tool_needs_approval(invoker: Any, tool: Any) -> bool:
    """Above the policy's ceiling, or the tool itself asks (an explicit HITL mode other than NONE).

    A HITL mode the tool only inherited from its risk says *how* to ask, not *whether*.
    """
    risk = ToolRisk(getattr(tool, "risk", ToolRisk.SAFE))
    mode = getattr(tool, "hitl_mode", HitlMode.NONE)
    asks = getattr(tool, "hitl_explicit", True) and mode is not HitlMode.NONE
    return risk > invoker.policy.max_risk_unapproved or asks


class ApprovalGate(Gate):
    name = "approval"

    def needed(self, invoker: Any, tool: Any) -> bool:
        return _tool_needs_approval(invoker, tool)

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        if inv.pre_approved is not None or inv.call.name in inv.session.approved_tools \
                or not _tool_needs_approval(inv.invoker, inv.tool):
            return await call_next(inv)
        tool, policy, handler = inv.tool, inv.invoker.policy, inv.invoker.approval_handler
        mode = tool.hitl_mode if tool.hitl_mode is not HitlMode.NONE else HitlMode.BLOCKING
        if handler is None:
            raise ApprovalDeniedError(
                f"tool '{tool.name}' (risk {tool.risk.value}) needs approval and no approval "
                "handler is configured; configure one (e.g. AutoApprovalHandler) or raise "
                "policy.max_risk_unapproved", tool_name=tool.name)
        request = ApprovalRequest.for_call(
            call_id=inv.call.id, tool=inv.call.name, risk=tool.risk, hitl_mode=mode,
            arguments=inv.arguments, session_id=inv.session.id,
            reason=f"risk {tool.risk.value} is above {policy.max_risk_unapproved.value}",
            timeout_s=policy.approval_timeout_s)
        await self._event(inv, HookEvent.APPROVAL_REQUESTED, {"request": request.model_dump()})
        decision = await self._decide(inv, request, mode)
        await self._event(inv, HookEvent.APPROVAL_DECIDED, {"decision": decision.model_dump()})
        if decision.outcome == "pending":
            raise ApprovalPending(f"tool '{tool.name}' is waiting for approval (request "
                                  f"{request.id}); the call runs once it is approved and resumed",
                                  request_id=request.id)
        if not decision.approved:
            why = decision.message or decision.outcome
            raise ApprovalDeniedError(f"the call to '{tool.name}' was not approved ({why}); do "
                                      "not retry it unless the user asks", tool_name=tool.name,
                                      details={"approval_id": request.id})
        if decision.scope == "session":
            inv.session.approved_tools.add(inv.call.name)
        return await call_next(inv.evolve(approval_id=request.id))

    async def _decide(self, inv: Invocation, request: ApprovalRequest, mode: HitlMode
                      ) -> ApprovalDecision:
        handler, policy = inv.invoker.approval_handler, inv.invoker.policy
        assert handler is not None
        if mode is HitlMode.FIRE_AND_CONTINUE:
            return ApprovalDecision(request_id=request.id, outcome="approved",
                                    approver="fire_and_continue",
                                    message="announced; proceeding without waiting")
        wait = policy.approval_timeout_s
        if mode is HitlMode.CONTINUE_ON_TIMEOUT:
            wait = min(policy.hitl_timeout_seconds, policy.approval_timeout_s)
        with anyio.move_on_after(wait):
            return await handler.request(request)
        if mode is HitlMode.CONTINUE_ON_TIMEOUT:
            decision = ApprovalDecision(request_id=request.id, outcome="approved",
                                        approver="timeout", message=f"approved automatically "
                                        f"after {wait:g} s without an answer")
        else:
            decision = ApprovalDecision(request_id=request.id, outcome="timeout",
                                        message=f"no decision within {wait:g} s")
        expire = getattr(handler, "expire", None)
        if expire is not None:  # a stored request must not be approvable after this answer
            await expire(decision)
        return decision

    @staticmethod
    async def _event(inv: Invocation, event: HookEvent, payload: dict[str, object]) -> None:
        hooks = inv.invoker.hooks
        if hooks is not None and hooks.has(event):
            await hooks.dispatch(event, {"tool": inv.call.name, "session": inv.session.id,
                                         **payload})
