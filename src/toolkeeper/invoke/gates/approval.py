"""Risk and approval: calls above the unapproved-risk ceiling (or whose tool asks) need a yes.

The gate asks the ``ApprovalService`` it holds: BLOCKING waits up to ``approval_timeout_s`` then
denies; CONTINUE_ON_TIMEOUT waits ``hitl_timeout_seconds`` then approves and records that it
did; FIRE_AND_CONTINUE announces the request and proceeds. Without a handler every call that
needs approval is denied.
"""

from __future__ import annotations

from typing import Any

from ...approval.models import SESSION_GRANT_S, ApprovalRequest
from ...approval.service import ApprovalService
from ...core.risk import HitlMode
from ...errors import ApprovalDeniedError, ApprovalPending
from ..results import InvocationResult
from ..state import Gate, Invocation, Next

__all__ = ["ApprovalGate"]


class ApprovalGate(Gate):
    name = "approval"

    def __init__(self, service: ApprovalService) -> None:
        self.service = service

    def needed(self, tool: Any) -> bool:
        return self.service.needs_approval(tool)

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        if inv.pre_approved is not None or inv.session.granted(inv.call.name):
            return await call_next(inv)
        tool, service = inv.tool, self.service
        mode = tool.hitl_mode if tool.hitl_mode is not HitlMode.NONE else HitlMode.BLOCKING
        if service.handler is None:
            raise ApprovalDeniedError(
                f"tool '{tool.name}' (risk {tool.risk.value}) needs approval and no approval "
                "handler is configured; configure one (e.g. AutoApprovalHandler) or raise "
                "policy.max_risk_unapproved", tool_name=tool.name)
        ceiling = service.policy.max_risk_unapproved
        request = ApprovalRequest.for_call(
            call_id=inv.call.id, tool=inv.call.name, risk=tool.risk, hitl_mode=mode,
            arguments=inv.arguments, session_id=inv.session.id,
            reason=f"risk {tool.risk.value} is above {ceiling.value}",
            # a session's own policy (a code-mode run's) can only shorten the wait
            timeout_s=min(service.policy.approval_timeout_s,
                          inv.session.policy.approval_timeout_s))
        found = await service.find_open(request)
        if found is not None and found.state == "executing":
            raise ApprovalDeniedError(
                f"request {found.request.id} for '{tool.name}' with these arguments was already "
                "taken for execution (by another call, or by a replica that stopped while "
                "running it); it does not run twice — check its outcome before calling again",
                tool_name=tool.name, details={"approval_id": found.request.id})
        if found is not None and found.decision is not None:
            # decided while nobody waited: approved runs it (once), denied says why
            request, decision = found.request, found.decision
        else:
            request = found.request if found is not None else request
            decision = await service.decide(request, mode, rejoin=found is not None)
        if decision.outcome == "pending":
            raise ApprovalPending(f"tool '{tool.name}' is waiting for approval (request "
                                  f"{request.id}); once it is approved, make the same call "
                                  "again (or resume the request) and it runs once",
                                  request_id=request.id)
        if not decision.approved:
            why = decision.message or decision.outcome
            raise ApprovalDeniedError(f"the call to '{tool.name}' was not approved ({why}); do "
                                      "not retry it unless the user asks", tool_name=tool.name,
                                      details={"approval_id": request.id})
        if not await service.take(request.id):
            raise ApprovalDeniedError(f"request {request.id} for '{tool.name}' was already "
                                      "executed by another process; it runs once",
                                      tool_name=tool.name, details={"approval_id": request.id})
        if decision.scope == "session":
            inv.session.grant(inv.call.name, SESSION_GRANT_S)
        result = await call_next(inv.evolve(approval_id=request.id))
        await service.complete(request.id, {"status": result.status, "text": result.text[:2000],
                                            "error_code": result.error_code})
        return result
