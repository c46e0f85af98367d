"""pydantic-ai: a toolbox and its invoker as a toolset (and a capability) of an ``Agent``.

```python
governed = ToolkeeperCapability(invoker, session_id="conversation-1")
agent = Agent(model, capabilities=[governed], output_type=[str, DeferredToolRequests])
```

Every call the agent makes goes through ``ToolInvoker.invoke``. In pydantic-ai's idiom:

- invalid arguments raise ``ModelRetry`` (the model is asked to correct them); a call refused by
  the door is a ``ToolDenied`` result; a tool that failed is ``ToolFailed``; never a crash;
- a call that waits for a person (the door answered ``pending``) raises ``ApprovalRequired``:
  the run ends with ``DeferredToolRequests`` (``metadata[call_id]["approval_id"]`` names the
  stored request). Resume the run with ``DeferredToolResults``: a ``ToolApproved`` call is
  recorded as approved in the approval store and runs once through the door — with
  ``ToolApproved(override_args={...})`` it runs once with those arguments instead (the request
  asked with the model's is the one approved, and the model is told what changed); a
  ``ToolDenied`` one is recorded as denied (the capability sees the results before the calls
  are made);
- ``await governed.results_from_store(requests)`` turns the decisions made on toolkeeper's side
  (the approval page, the API, ``toolkeeper approvals decide``) into the ``DeferredToolResults``
  that resume the run (an edit made there as ``override_args``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..approval.models import args_digest
from ..invoke.invoker import ToolInvoker
from ..invoke.results import InvocationResult
from .calls import GovernedCalls

try:
    from pydantic_ai import CallToolsNode, RunContext
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.exceptions import ApprovalRequired, ModelRetry, ToolFailed
    from pydantic_ai.messages import ModelResponse
    from pydantic_ai.tools import (
        DeferredToolRequests,
        DeferredToolResults,
        ToolApproved,
        ToolDefinition,
        ToolDenied,
    )
    from pydantic_ai.toolsets import AbstractToolset
    from pydantic_ai.toolsets.abstract import ToolsetTool
    from pydantic_core import SchemaValidator, core_schema
except ImportError as exc:
    raise ImportError("toolkeeper.adapters.pydantic_ai needs pydantic-ai; install it with "
                      "pip install 'toolkeeper[pydantic-ai]'") from exc

if TYPE_CHECKING:
    from pydantic_ai.capabilities.abstract import AgentNode

__all__ = ["ToolkeeperCapability", "ToolkeeperToolset"]

FRAMEWORK = "pydantic-ai"
_ANY_ARGUMENTS = SchemaValidator(core_schema.dict_schema(core_schema.str_schema(),
                                                         core_schema.any_schema()))
"""pydantic-ai checks only that the arguments are an object: the door validates them against
the tool's own schema (and audits the refusal), and its message comes back as ``ModelRetry``."""


class ToolkeeperToolset(AbstractToolset[object]):
    """The catalog's tools for a pydantic-ai agent, every call through the door (for an agent
    of any dependencies: the toolset reads none of them).

    Args:
        invoker: The door (its approval handler decides who waits for a person: with
            ``PersistedApprovalHandler(store)`` a call that needs approval becomes a deferred
            approval request).
        session_id: The conversation's id; the same one for a run resumed after a restart.
        approver: How the agent's person is named in the store and the audit log
            (``"pydantic-ai:user"``).
        max_retries: How many times the model may correct invalid arguments of one tool.
    """

    def __init__(self, invoker: ToolInvoker | GovernedCalls, *, session_id: str | None = None,
                 approver: str | None = None, max_retries: int = 3, id: str | None = None
                 ) -> None:
        self.calls = invoker if isinstance(invoker, GovernedCalls) else GovernedCalls(
            invoker, framework=FRAMEWORK, session_id=session_id, approver=approver)
        self.max_retries = max_retries
        self._id = id

    @property
    def id(self) -> str | None:
        return self._id

    async def get_tools(self, ctx: RunContext[object]) -> dict[str, ToolsetTool[object]]:
        return {d.name: ToolsetTool(
            toolset=self, max_retries=self.max_retries, args_validator=_ANY_ARGUMENTS,
            tool_def=ToolDefinition(name=d.name, description=d.description,
                                    parameters_json_schema=dict(d.parameters)))
            for d in self.calls.declared}

    async def call_tool(self, name: str, tool_args: dict[str, object], ctx: RunContext[object],
                        tool: ToolsetTool[object]) -> object:
        call_id = ctx.tool_call_id or ""
        if ctx.tool_call_approved:  # the person may have approved other arguments
            asked = _asked(ctx, call_id, tool_args)
            result = await self.calls.decided(
                name, asked, call_id, approved=True,
                edited=tool_args if asked is not tool_args else None)
        else:
            result = await self.calls.call(name, tool_args, call_id)
        return answer(result)

    async def results_from_store(self, requests: DeferredToolRequests) -> DeferredToolResults:
        """The ``DeferredToolResults`` for the approvals decided on toolkeeper's side; calls
        still waiting are left out (resume with what is decided, or wait)."""
        approvals: dict[str, bool | ToolApproved | ToolDenied] = {}
        for part in requests.approvals:
            found = await self.calls.open_request(part.tool_name, part.args_as_dict())
            decision = found.decision if found is not None else None
            if decision is None or decision.outcome == "pending":
                continue
            approvals[part.tool_call_id] = ToolApproved(override_args=decision.arguments) \
                if decision.approved else ToolDenied(
                    decision.message or f"denied by {decision.approver or 'a person'}")
        return DeferredToolResults(approvals=approvals)


def _asked(ctx: RunContext[object], call_id: str, given: dict[str, object]
           ) -> dict[str, object]:
    """The arguments the model asked with, for a call resumed as approved: pydantic-ai passes
    a person's ``ToolApproved(override_args=…)`` as the call's arguments, and the request waits
    under the asked ones (found in the run's messages). ``given`` itself when they are the
    same or the call is not found."""
    for message in reversed(ctx.messages):
        if not isinstance(message, ModelResponse):
            continue
        for part in message.tool_calls:
            if part.tool_call_id == call_id:
                asked = part.args_as_dict()
                return given if args_digest(asked) == args_digest(given) else asked
    return given


def answer(result: InvocationResult) -> object:
    """A door's result in pydantic-ai's idiom."""
    if result.status == "ok":
        return result.text
    if result.status == "pending":
        raise ApprovalRequired(metadata={"approval_id": result.approval_id, "tool": result.tool,
                                         "message": result.text})
    if result.error_code == "invalid_arguments":
        raise ModelRetry(result.text)
    if result.status == "denied":
        return ToolDenied(result.text)
    raise ToolFailed(result.text)


@dataclass(init=False)
class ToolkeeperCapability(AbstractCapability[object]):
    """The toolset plus what a toolset cannot see: the ``ToolDenied`` results a resumed run is
    given, recorded in the approval store and the audit log before the calls are made.

    Takes the same arguments as ``ToolkeeperToolset``; ``toolset`` and ``calls`` are its parts.
    """

    toolset: ToolkeeperToolset

    def __init__(self, invoker: ToolInvoker | GovernedCalls, *, session_id: str | None = None,
                 approver: str | None = None, max_retries: int = 3) -> None:
        self.toolset = ToolkeeperToolset(invoker, session_id=session_id, approver=approver,
                                         max_retries=max_retries)

    @property
    def calls(self) -> GovernedCalls:
        return self.toolset.calls

    def get_toolset(self) -> ToolkeeperToolset:
        return self.toolset

    async def results_from_store(self, requests: DeferredToolRequests) -> DeferredToolResults:
        """See ``ToolkeeperToolset.results_from_store``."""
        return await self.toolset.results_from_store(requests)

    async def before_node_run(self, ctx: RunContext[object], *,
                              node: AgentNode[object]) -> AgentNode[object]:
        if isinstance(node, CallToolsNode) and node.tool_call_results:
            for part in node.model_response.tool_calls:
                given = node.tool_call_results.get(part.tool_call_id)
                if isinstance(given, ToolDenied):
                    await self.calls.decided(part.tool_name, part.args_as_dict(),
                                             part.tool_call_id, approved=False,
                                             message=given.message)
        return node

