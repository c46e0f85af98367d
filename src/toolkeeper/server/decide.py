"""One decision on one approval request, the same for the page, the API and the CLI.

The decision is bound to the request id and, when the decider saw them, to the arguments'
digest: a decision for other arguments than the stored ones is refused and recorded in the audit
log; the first decision wins and a replay changes nothing. Deciding is the operator's: a client
token (an agent) never approves its own calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.to_thread

from ..approval.models import ApprovalDecision, args_digest
from ..approval.store import ApprovalStore, StoredApproval
from ..errors import InvalidArgumentsError
from ..invoke.audit import AuditEntry, AuditLog
from ..tools.tool import Tool
from .card_text import plain
from .clients import ANONYMOUS, OPERATOR
from .views import client_of, session_of

if TYPE_CHECKING:
    from ..toolbox.catalog import CatalogBase

__all__ = ["CHOICES", "DecisionError", "decide", "edit_checked"]

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
                 approver: str = "", arguments: object = None,
                 catalog: CatalogBase | None = None,
                 judge: Callable[[StoredApproval], str | None] | None = None
                 ) -> StoredApproval:
    """Record ``choice`` (approve, approve_session, deny) for ``request_id``; returns the
    request as it now stands. ``arguments`` (with ``approve`` only): approve the call with
    these instead of the asked ones, once they pass the tool's schema (``catalog`` holds it).

    Raises:
        DecisionError: 403 for a client token, 404 for a request it cannot see, 400 for an
            unknown choice or edited arguments the tool does not take, 403 when ``judge``
            (the ``decide`` policies) refuses this operator the request, 409 when the
            arguments differ from the ones seen (recorded in the audit log) or when the
            request was already decided.
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
    refused = judge(stored) if judge is not None else None
    if refused is not None:
        raise DecisionError(403, "not_allowed", refused)
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
    edited = None if arguments is None else edit_checked(stored, choice, arguments, catalog)
    decision = ApprovalDecision(request_id=request_id, outcome=outcome,
                                message=message, approver=approver,
                                scope=scope_of, arguments=edited)
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


def edit_checked(stored: StoredApproval, choice: str, arguments: object,
                 catalog: CatalogBase | None) -> dict[str, object] | None:
    """A person's edit of ``stored``'s arguments, checked before it is recorded: an object,
    with ``approve`` alone, and taken by the tool's schema. ``None`` when it changes nothing
    (approved as asked).

    Raises:
        DecisionError: 400 naming what is wrong and how to send it.
    """
    request = stored.request
    if not isinstance(arguments, dict):
        raise DecisionError(400, "bad_arguments", "arguments must be a JSON object of the "
                            f"tool's arguments, like the request's: {type(arguments).__name__} "
                            "sent")
    if choice != "approve":
        raise DecisionError(400, "bad_arguments", "edited arguments go with decision "
                            "'approve' (this call alone); a denial or a session grant takes "
                            "none")
    edited = {str(k): v for k, v in arguments.items()}
    if args_digest(edited) == request.args_digest:
        return None
    tool = catalog.get(request.tool) if catalog is not None else None
    if isinstance(tool, Tool):
        try:
            tool.validate_arguments(edited)
        except InvalidArgumentsError as exc:
            raise DecisionError(400, "bad_arguments", _unfit(request.tool, exc)) from None
    return edited


def _unfit(tool: str, exc: InvalidArgumentsError) -> str:
    """Why an edit does not fit, for the person who made it (the validator's message is
    written for the model: "… call the tool again")."""
    problems = exc.details.get("problems")
    said = [plain(str(p.get("message", ""))) for p in problems[:5]
            if isinstance(p, dict)] if isinstance(problems, list) else []
    more = f"; and {len(problems) - 5} more" if isinstance(problems, list) and \
        len(problems) > 5 else ""
    why = "; ".join(said) + more if said else "they do not match the tool's schema"
    return (f"Not approved: the edited arguments do not fit '{plain(tool)}' ({why}). Correct "
            "them and approve again, or approve or deny the call as asked.")
