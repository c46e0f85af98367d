"""One decision on one approval request, the same for the page, the API and the CLI.

The decision is bound to the request id and, when the decider saw them, to the arguments'
digest: a decision for other arguments than the stored ones is refused and recorded in the audit
log; the first decision wins and a replay changes nothing. Deciding is the operator's: a client
token (an agent) never approves its own calls.
"""

from __future__ import annotations

import time
from typing import Any, Literal

import anyio
import anyio.to_thread

from ..approval.models import ApprovalDecision
from ..approval.store import ApprovalStore, StoredApproval
from ..invoke.audit import AuditEntry, AuditLog
from .clients import ANONYMOUS, OPERATOR
from .views import client_of, session_of

__all__ = ["CHOICES", "DecisionError", "decide"]

CHOICES: dict[str, tuple[Literal["approved", "denied"], Literal["once", "session"]]] = {
    "approve": ("approved", "once"), "approve_session": ("approved", "session"),
           "deny": ("denied", "once")}


class DecisionError(Exception):
    """Why a decision was not recorded: an HTTP status, a stable code and a message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code


async def decide(store: ApprovalStore, audit: AuditLog | None, client: str, request_id: str,
                 choice: str, *, message: str = "", digest: Any = None,
                 approver: str = "") -> StoredApproval:
    """Record ``choice`` (approve, approve_session, deny) for ``request_id``; returns the
    request as it now stands.

    Raises:
        DecisionError: 403 for a client token, 404 for a request it cannot see, 400 for an
            unknown choice, 409 when the arguments differ from the ones seen (recorded in the
            audit log) or when the request was already decided.
    """
    if client != OPERATOR:
        raise DecisionError(403, "forbidden", "only the operator decides approval requests; "
                                              "a client token can list its own")
    if choice not in CHOICES:
        raise DecisionError(400, "bad_request", "decision must be one of: "
                            + ", ".join(CHOICES))
    stored = await anyio.to_thread.run_sync(store.get, request_id)
    scope = session_of(client)
    if stored is None or (scope is not None and stored.request.session_id != scope):
        raise DecisionError(404, "not_found", f"no approval request {request_id!r}")
    request = stored.request
    if digest is not None and digest != request.args_digest:
        if audit is not None:
            await anyio.to_thread.run_sync(audit.record, AuditEntry(
                ts=time.time(), call_id=request.call_id, session_id=request.session_id,
                tool=request.tool, args_digest=str(digest)[:128], arguments=request.arguments,
                status="denied", error_code="policy_violation", duration_ms=0.0,
                approval_id=request.id, approver=approver,
                decision="refused: decided for other arguments than the stored ones"))
        raise DecisionError(409, "mismatch", f"request {request_id} holds other arguments "
                            "than the ones decided on; reload it and decide again")
    outcome, scope_of = CHOICES[choice]
    if scope_of == "session" and client_of(request.session_id) == ANONYMOUS:
        raise DecisionError(409, "no_session_grant", f"request {request_id} comes from an "
                            "unauthenticated client (--auth none): every local process is that "
                            "client, so it can only be approved once; approve this call alone")
    decision = ApprovalDecision(request_id=request_id, outcome=outcome,
                                message=message, approver=approver,
                                scope=scope_of)
    if not await anyio.to_thread.run_sync(store.decide, decision):
        now = await anyio.to_thread.run_sync(store.get, request_id)
        state = now.state if now is not None else "gone"
        if now is not None and now.decision is not None and now.decision.approver == "" \
                and state == "expired":
            raise DecisionError(409, "expired", f"request {request_id} expired: nobody decided "
                                "within its time-to-live, so it cannot be approved any more. "
                                "The same call made again asks anew")
        raise DecisionError(409, "already_decided", f"request {request_id} was already "
                            f"decided ({state}); the first decision stands")
    after = await anyio.to_thread.run_sync(store.get, request_id)
    assert after is not None
    return after
