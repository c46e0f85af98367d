"""``GovernedCalls``: what every framework adapter shares — the tools as declared by our own
export, one invoker session, and the framework's approve/deny recorded in the approval store.

A call a framework's agent makes runs through ``ToolInvoker.invoke``. When the policy says it
needs a person and the invoker's handler stores requests without waiting
(``PersistedApprovalHandler(store)``), the door answers ``pending`` with the request's id: the
adapter turns that into the framework's own human-in-the-loop request. When the framework's
person decides, ``decided`` records the decision in the store (a person's decision: it applies
once, and only to a request still pending — one made on toolkeeper's page first stands) and makes
the call again through the door, which runs an approved request exactly once, or answers the
denial, and writes the audit row naming who decided.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import anyio.to_thread

from ..approval.models import ApprovalDecision, args_digest, changed
from ..approval.store import ApprovalStore, FindsOpen, StoredApproval
from ..core.call import ToolCall
from ..core.context import Caller
from ..core.json import JsonObject
from ..errors import UnknownToolError, UsageError
from ..formats.export import export
from ..invoke.invoker import ToolInvoker
from ..invoke.results import InvocationResult

__all__ = ["Declared", "GovernedCalls"]


@dataclass(frozen=True, kw_only=True)
class Declared:
    """One tool as a framework is shown it: its wire name, description and JSON Schema (from
    toolkeeper's own export), and the tool's name in the catalog."""

    name: str
    tool: str
    description: str
    parameters: JsonObject


class GovernedCalls:
    """A catalog and its invoker seen from one framework.

    Args:
        invoker: The door every call goes through.
        framework: Who the decisions recorded here come from (``pydantic-ai`` …).
        session_id: The conversation's id. Give the same one to the objects of a run resumed
            after a restart: a request is found again by session, tool and arguments.
        approver: How a decision made in the framework is signed in the store and the audit
            log (default ``"<framework>:user"``, a person's decision).
    """

    def __init__(self, invoker: ToolInvoker, *, framework: str, session_id: str | None = None,
                 approver: str | None = None) -> None:
        if not isinstance(invoker, ToolInvoker):
            raise UsageError(f"the {framework} adapter needs a ToolInvoker, got "
                             f"{type(invoker).__name__}; pass ToolInvoker(toolbox, ...)")
        self.invoker = invoker
        self.framework = framework
        self.session = invoker.open_session(session_id=session_id,
                                            caller=Caller(client=framework))
        """The session every call of the framework's agent runs in: one budget and trace; a
        tool reads the framework's name as ``ctx.caller.client``."""
        self.approver = approver or f"{framework}:user"
        exported = export(invoker.registry.all(), "openai-chat")
        self._names = exported.names
        self.declared = [_declared(d, exported.names.name) for d in exported.declarations
                         if d.get("type") == "function"]
        """The tools as the framework is shown them, in catalog order."""

    @property
    def session_id(self) -> str:
        return self.session.id

    @property
    def store(self) -> ApprovalStore | None:
        return self.invoker.approvals.store

    def tool_name(self, wire_name: str) -> str:
        """The catalog name behind a wire name the framework was shown (an unknown one as it
        is: the door answers it with the closest names)."""
        try:
            return self._names.name(wire_name)
        except UnknownToolError:
            return wire_name

    async def call(self, wire_name: str, arguments: Mapping[str, object], call_id: str
                   ) -> InvocationResult:
        """Run one call of the framework's agent through the door."""
        call = ToolCall(id=call_id, name=self.tool_name(wire_name), arguments=dict(arguments),
                        wire_name=wire_name)
        return await self.invoker.invoke(call, session=self.session)

    async def open_request(self, wire_name: str, arguments: Mapping[str, object]
                           ) -> StoredApproval | None:
        """The stored request of this session for this call, if one is open (pending,
        approved and not yet run, or recently denied or run)."""
        store: object = self.store
        if not isinstance(store, FindsOpen):
            return None
        return await anyio.to_thread.run_sync(store.find_open, self.session.id,
                                              self.tool_name(wire_name), args_digest(dict(arguments)))

    async def decided(self, wire_name: str, arguments: Mapping[str, object], call_id: str, *,
                      approved: bool, message: str = "",
                      edited: Mapping[str, object] | None = None) -> InvocationResult:
        """The framework's person approved or denied this call (``arguments``: as the model
        asked it; ``edited``: the arguments the person approved instead): record it (once) and
        make the asked call again through the door — approved, it runs exactly once (with the
        edit, and the model is told so); denied, the model is told why and the audit log has
        the denial."""
        found = await self.open_request(wire_name, arguments)
        if found is not None and found.state == "pending":
            await self._record(found, approved=approved, message=message, edited=edited)
            if not approved:
                found = await self.open_request(wire_name, arguments)
        if not approved and (found is None or found.state != "denied"):
            # no denial of ours to tell (approved on toolkeeper's side, or expired): the
            # framework's denial stands for the model, nothing runs and nothing is asked anew
            tool = self.tool_name(wire_name)
            return InvocationResult.failed(
                "denied", f"the call to '{tool}' was denied in {self.framework}. "
                f"{message}".strip(), "denied", call_id=call_id, tool=tool,
                approval_id=found.request.id if found else None)
        return await self.call(wire_name, arguments, call_id)

    async def _record(self, found: StoredApproval, *, approved: bool, message: str,
                      edited: Mapping[str, object] | None = None) -> None:
        """The framework's person's decision, in the store: applied only while the request is
        pending (a decision made first elsewhere stands). An edit that changes nothing is an
        approval as asked."""
        store = self.store
        if store is None:
            return
        if edited is not None and (not approved or not changed(found.request.arguments,
                                                                edited)):
            edited = None
        decision = ApprovalDecision(
            request_id=found.request.id, outcome="approved" if approved else "denied",
            approver=self.approver, arguments=dict(edited) if edited is not None else None,
            message=message or ("" if approved else f"denied in {self.framework}"))
        await anyio.to_thread.run_sync(store.decide, decision)

    async def decisions(self, approval_ids: Iterable[str]) -> dict[str, ApprovalDecision]:
        """The decisions made in toolkeeper (the page, the API, ``toolkeeper approvals``) on
        these requests; undecided ones are left out."""
        store = self.store
        if store is None:
            return {}
        found: dict[str, ApprovalDecision] = {}
        for approval_id in approval_ids:
            stored = await anyio.to_thread.run_sync(store.get, approval_id)
            if stored is not None and stored.decision is not None and stored.state != "pending":
                found[approval_id] = stored.decision
        return found

    async def aclose(self) -> None:
        """End the session (its artifact pins)."""
        await self.session.close()


def _declared(declaration: Mapping[str, object], tool_name: Callable[[str], str]) -> Declared:
    function = declaration["function"]
    if not isinstance(function, dict):
        raise UsageError(f"an openai-chat declaration without a function: {declaration!r}")
    name = str(function["name"])
    parameters = function.get("parameters") or {"type": "object", "properties": {}}
    return Declared(name=name, tool=tool_name(name),
                    description=str(function.get("description", "")), parameters=parameters)
