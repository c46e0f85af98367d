"""The OpenAI Agents SDK: a toolbox and its invoker as ``FunctionTool``s of an ``Agent``.

```python
governed = ToolkeeperTools(invoker, session_id="conversation-1")
agent = Agent(name="ops", model=model, tools=governed.tools, hooks=governed.hooks)
```

Every call the agent makes goes through ``ToolInvoker.invoke``. In the SDK's idiom:

- a refused or failed call (invalid arguments, a denial, a tool that raised) is the tool's
  output text, which the model reads; never an exception in the run;
- a tool the policy can hold for a person has ``needs_approval``: the SDK asks it before the call,
  and it asks the door. When the door answers ``pending`` (``PersistedApprovalHandler(store)``)
  the run stops with an interruption (``result.interruptions``); the request is stored, so the
  approval page shows it too. ``state.approve(item)`` resumes it: the call is recorded as
  approved and runs once through the door. ``state.reject(item)``: the hooks see the rejected
  call's output before the next model turn and record the denial. Every other answer of the door
  (the call ran, or was refused) is kept and is what the tool returns; it never runs twice;
- ``await governed.apply_store_decisions(state)`` approves or rejects the interruptions decided
  on toolkeeper's side (the page, the API, ``toolkeeper approvals decide``) so that
  ``Runner.run(agent, state)`` resumes them. ``RunState.to_json()`` / ``from_json`` carry a run
  across a restart (give the new objects the same ``session_id``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..invoke.invoker import ToolInvoker
from ..invoke.results import InvocationResult
from .calls import Declared, GovernedCalls

try:
    from agents import (
        Agent,
        AgentHooks,
        FunctionTool,
        RunContextWrapper,
        RunState,
        TResponseInputItem,
    )
    from agents.run_context import TContext
    from agents.tool_context import ToolContext
except ImportError as exc:
    raise ImportError("toolkeeper.adapters.openai_agents needs the OpenAI Agents SDK; install "
                      "it with pip install 'toolkeeper[openai-agents]'") from exc

__all__ = ["ToolkeeperHooks", "ToolkeeperTools"]

FRAMEWORK = "openai-agents"


class ToolkeeperTools:
    """The catalog's tools for an OpenAI Agents SDK agent, every call through the door.

    Args:
        invoker: The door (with ``PersistedApprovalHandler(store)`` a call that needs approval
            becomes an interruption).
        session_id: The conversation's id; the same one for a run resumed after a restart.
        approver: How the agent's person is named in the store and the audit log
            (``"openai-agents:user"``).

    Attributes:
        tools: The ``FunctionTool``s to give ``Agent(tools=...)``.
        hooks: The ``AgentHooks`` to give ``Agent(hooks=...)``: they record the rejections.
    """

    def __init__(self, invoker: ToolInvoker, *, session_id: str | None = None,
                 approver: str | None = None) -> None:
        self.calls = GovernedCalls(invoker, framework=FRAMEWORK, session_id=session_id,
                                   approver=approver)
        self._answered: dict[str, InvocationResult] = {}
        self.tools = [self._function_tool(d) for d in self.calls.declared]
        self.hooks = ToolkeeperHooks(self)

    def _function_tool(self, declared: Declared) -> FunctionTool:
        tool = self.calls.invoker.registry.get(declared.tool)
        asks = tool is not None and self.calls.invoker.approvals.needs_approval(
            tool, policy=self.calls.session.policy, chain=False)  # its session's policy
        name = declared.name

        async def invoke(ctx: ToolContext[object], raw: str) -> str:
            return await self._invoke(name, ctx.tool_call_id, raw, asks=asks)

        async def needs_approval(ctx: RunContextWrapper[object], params: dict[str, object],
                                 call_id: str) -> bool:
            return await self._ask(name, params, call_id)

        return FunctionTool(name=name, description=declared.description,
                            params_json_schema=dict(declared.parameters), on_invoke_tool=invoke,
                            strict_json_schema=False,
                            needs_approval=needs_approval if asks else False)

    async def _ask(self, name: str, params: dict[str, object], call_id: str) -> bool:
        """The SDK asks whether this call needs approval: the door answers. ``pending``
        interrupts the run; any other answer is kept for ``on_invoke_tool``."""
        result = await self.calls.call(name, params, call_id)
        if result.status == "pending":
            return True
        self._answered[call_id] = result
        return False

    async def _invoke(self, name: str, call_id: str, raw: str, *, asks: bool) -> str:
        answered = self._answered.pop(call_id, None)
        if answered is not None:
            return answer(answered)
        try:
            arguments = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            return (f"Error: the arguments of '{name}' are not valid JSON ({exc.msg} at "
                    f"{exc.pos}); send a JSON object")
        if not isinstance(arguments, dict):
            return f"Error: the arguments of '{name}' must be a JSON object"
        if asks:  # called after the SDK's approval (its needs_approval said so)
            return answer(await self.calls.decided(name, arguments, call_id, approved=True))
        return answer(await self.calls.call(name, arguments, call_id))

    async def record_rejections(self, items: Sequence[object]) -> None:
        """Record the denials of the requests of this session that the framework answered
        without running them: a call still pending here whose output is already in the
        conversation was rejected (an approved one goes through ``on_invoke_tool``)."""
        store = self.calls.store
        if store is None:
            return
        outputs = {str(i.get("call_id")): str(i.get("output", "")) for i in items
                   if isinstance(i, dict) and i.get("type") == "function_call_output"}
        if not outputs:
            return
        for request in store.pending(self.calls.session_id):
            if request.call_id in outputs:
                await self.calls.decided(request.tool, request.arguments, request.call_id,
                                         approved=False, message=outputs[request.call_id])

    async def apply_store_decisions(self, state: RunState[TContext]) -> int:
        """Approve or reject, in ``state``, the interruptions decided on toolkeeper's side;
        returns how many were decided (the others still wait)."""
        applied = 0
        for item in state.get_interruptions():
            raw = item.raw_item
            name = getattr(raw, "name", None) or item.tool_name or ""
            arguments = getattr(raw, "arguments", None) or "{}"
            found = await self.calls.open_request(name, json.loads(arguments))
            decision = found.decision if found is not None else None
            if decision is None or decision.outcome == "pending":
                continue
            if decision.approved:
                state.approve(item)
            else:
                state.reject(item, rejection_message=decision.message or
                             f"denied by {decision.approver or 'a person'}")
            applied += 1
        return applied


class ToolkeeperHooks(AgentHooks[TContext]):
    """Before each model turn, records the calls the SDK rejected (``state.reject``); for an
    agent of any context (they read none of it)."""

    def __init__(self, tools: ToolkeeperTools) -> None:
        self.governed = tools

    async def on_llm_start(self, context: RunContextWrapper[TContext], agent: Agent[TContext],
                           system_prompt: str | None,
                           input_items: list[TResponseInputItem]) -> None:
        await self.governed.record_rejections(list(input_items))


def answer(result: InvocationResult) -> str:
    """A door's result as the tool's output: the text the model reads (``Error: …`` for a call
    that was refused or failed)."""
    if result.status == "ok":
        return result.text
    return f"Error ({result.error_code or result.status}): {result.text}"
