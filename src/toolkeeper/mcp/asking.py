"""Asking the person at the MCP client (``[approval] channels = ["page", "client"]``).

On a 2026-07-28 session, a call that needs approval does not wait for the page: as soon as its
request is stored, the call answers an ``input_required`` result holding a form (approve or
deny, with the tool, its risk and its exact arguments) and the request id as its
``requestState`` (sealed by the SDK; bound to the client). The client shows the form to its
user and retries the call with the answer: the answer decides the request — unless a decision
from another channel (the page, the API, the CLI) came first: the first one wins, once, and
its approver names its channel (``client:NAME``, ``operator:NAME``, …). The retried call then
runs (or is refused) through the door like any call made again.

Off by default: the person at the client may be the agent's user rather than the approver.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.request_state import RequestStateSecurity

from ..approval.models import ApprovalDecision
from ..approval.service import asked_elsewhere
from ..core.call import ToolCall
from ..core.context import ToolContext
from ..core.risk import HitlMode
from ..hooks import HookEvent
from ..invoke.invoker import ToolInvoker
from ..invoke.results import InvocationResult
from ..invoke.session import InvokerSession

__all__ = ["ClientChannel", "state_security"]

FORM_KEY = "approval"
STORE_WAIT_S = 5.0
"""How long the handler may take to store a request it was just handed."""
SHOWN_ARGUMENTS = 4000
"""Characters of the arguments the form shows (the page shows them all)."""


@dataclass
class _Asking:
    """One call in flight on a session that can be asked."""

    event: anyio.Event = field(default_factory=anyio.Event)
    request: dict[str, Any] | None = None


class ClientChannel:
    """Calls that ask their client, and the answers that come back with the retried call."""

    def __init__(self, invoker: ToolInvoker) -> None:
        self.invoker = invoker
        self._asking: dict[str, _Asking] = {}
        invoker.approvals.hooks.register(HookEvent.APPROVAL_REQUESTED, self._requested)

    async def _requested(self, _event: HookEvent, payload: dict[str, Any]) -> None:
        request = payload.get("request") or {}
        asking = self._asking.get(str(request.get("call_id")))
        if asking is not None:
            asking.request = request
            asking.event.set()

    async def invoke(self, call: ToolCall, session: InvokerSession, ctx: ToolContext | None
                     ) -> InvocationResult | str:
        """The call's result, or the id of the approval request to ask the client about
        (the call stopped waiting once its request was stored)."""
        asking = self._asking[call.id] = _Asking()
        result: InvocationResult | None = None
        try:
            async with anyio.create_task_group() as group:
                async def run() -> None:
                    nonlocal result
                    # a call the call makes (a script's, in code mode) that needs a person does
                    # not sit out the page's wait either: its request is what gets asked here
                    with asked_elsewhere():
                        result = await self.invoker.invoke(call, session=session, ctx=ctx)
                    group.cancel_scope.cancel()

                group.start_soon(run)
                await asking.event.wait()
                assert asking.request is not None
                if not self._answers_at_once(asking.request):
                    await self._stored(str(asking.request["id"]))
                    group.cancel_scope.cancel()  # the request is stored: ask, do not wait
                # else the call answers 'pending' as soon as its request is stored (run ends)
        finally:
            self._asking.pop(call.id, None)
        if result is not None:
            if result.status == "pending" and result.approval_id:
                return result.approval_id  # rejoined a request asked before
            return result
        assert asking.request is not None
        return str(asking.request["id"])

    def _answers_at_once(self, request: dict[str, Any]) -> bool:
        """Whether the call of ``request`` answers ``pending`` by itself once the request is
        stored (``asked_elsewhere``), so it ends as any call does rather than cancelled."""
        mode, expires = request.get("hitl_mode"), request.get("expires_at")
        return isinstance(mode, HitlMode) and self.invoker.approvals.leaves_open_at_once(
            mode, expires if isinstance(expires, int | float) else None)

    async def _stored(self, request_id: str) -> None:
        """Wait (bounded) until the handler has stored the request announced a moment ago."""
        store = self.invoker.approvals.store
        if store is None:
            return
        with anyio.move_on_after(STORE_WAIT_S):
            while await anyio.to_thread.run_sync(store.get, request_id) is None:
                await anyio.sleep(0.005)

    def ask(self, request_id: str) -> types.InputRequiredResult:
        """The form for ``request_id``, as an ``input_required`` result."""

        store = self.invoker.approvals.store
        stored = store.get(request_id) if store is not None else None
        shown = "" if stored is None else json.dumps(stored.request.arguments, indent=1,
                                                     ensure_ascii=True, default=str)
        if len(shown) > SHOWN_ARGUMENTS:
            shown = shown[:SHOWN_ARGUMENTS] + f"\n… {len(shown) - SHOWN_ARGUMENTS} more characters"
        what = "" if stored is None else (f"'{stored.request.tool}' (risk "
                                          f"{stored.request.risk.value}) ")
        message = (f"The agent wants to run {what}and needs your approval (request "
                   f"{request_id}). Arguments:\n{shown}\nIt can also be decided at "
                   f"{self.invoker.approvals.where(request_id)}.")
        form = types.ElicitRequest(params=types.ElicitRequestFormParams(
            message=message, requested_schema={
                "type": "object", "required": ["decision"],
                "properties": {"decision": {"type": "string", "enum": ["approve", "deny"],
                                            "title": "Run this call?"},
                               "message": {"type": "string", "title": "Why (optional)"}}}))
        return types.InputRequiredResult(input_requests={FORM_KEY: form},
                                         request_state=request_id)

    async def answer(self, params: types.CallToolRequestParams, session: InvokerSession,
                     client: str) -> None:
        """Apply the client's answer carried by a retried call, when it answers a request of
        this client's session that is still pending (the first decision wins)."""
        store = self.invoker.approvals.store
        request_id, responses = params.request_state, params.input_responses or {}
        answer = responses.get(FORM_KEY)
        if store is None or not request_id or answer is None:
            return
        stored = await anyio.to_thread.run_sync(store.get, request_id)
        if stored is None or stored.request.session_id != session.id or \
                (stored.request.tool != params.name and not self._runs_scripts(params.name)):
            return  # not this client's request: nothing to decide
        action = getattr(answer, "action", None)
        content = getattr(answer, "content", None) or {}
        if action == "cancel" or action not in ("accept", "decline"):
            return  # dismissed: still pending, asked again on the next call
        approved = action == "accept" and content.get("decision") == "approve"
        note = str(content.get("message") or "")[:2000]
        decision = ApprovalDecision(
            request_id=request_id, outcome="approved" if approved else "denied",
            approver=f"client:{client}",
            message=note or ("approved at the client" if approved else "denied at the client"))
        await anyio.to_thread.run_sync(store.decide, decision)


    def _runs_scripts(self, name: str) -> bool:
        """Whether calls of ``name`` run scripts whose own calls ask (code mode: the request
        a paused run waits on is for the script's call, not for ``tool_chain``)."""
        tool = self.invoker.registry.get(name)
        return tool is not None and tool.runs_scripts


def state_security(secret: str, client_of: Any) -> Any:
    """The SDK's sealing of ``requestState`` under a key every replica derives from the same
    operator secret, bound to the calling client (``client_of(ctx)``)."""

    key = hashlib.sha256(b"toolkeeper request state\0" + secret.encode()).digest()
    return RequestStateSecurity(keys=[key], ttl=3600.0, bind_principal=client_of)
