"""LangChain and LangGraph: a toolbox and its invoker as LangChain tools, approval as LangGraph's
``interrupt``.

```python
governed = ToolkeeperTools(invoker, session_id="thread-1")
agent = create_agent(model, governed.tools, checkpointer=checkpointer)
```

Every call the agent makes goes through ``ToolInvoker.invoke``. In LangChain's idiom:

- a refused or failed call (invalid arguments, a denial, a tool that raised) is a
  ``ToolMessage`` with ``status="error"`` whose text the model reads; never an exception in the
  graph;
- a call that waits for a person (the door answered ``pending``: ``PersistedApprovalHandler``)
  calls LangGraph's ``interrupt`` with a request shaped like ``HumanInTheLoopMiddleware``'s
  (``action_requests``, ``review_configs``) plus the stored request's ``approval_id``. Resume
  the graph with ``Command(resume={"decisions": [{"type": "approve"}]})`` (or
  ``{"type": "reject", "message": ...}``, or ``{"type": "edit", "edited_action": {"name": ...,
  "args": {...}}}`` to approve it with other arguments): the decision is recorded in the
  approval store and the audit log, and an approved call runs once through the door (an edited
  one with the edit, and the model is told what changed). Needs a checkpointer (a
  SQLite one carries a run across a restart; give the new objects the same ``session_id``).
  Several risky calls in one turn are several interrupts: resume with a map of interrupt id to
  decision, ``Command(resume={i.id: {"decisions": [...]} for i in run["__interrupt__"]})``, as
  LangGraph does for multiple interrupts;
- the graph may be run either way: ``ainvoke`` / ``astream`` await the door, ``invoke`` /
  ``stream`` run each call to completion in the graph's worker thread;
- ``await governed.resume_from_store(interrupts)`` turns the decisions made on toolkeeper's side
  (the page, the API, ``toolkeeper approvals decide``) into that ``Command``.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

from ..approval.models import ApprovalDecision
from ..invoke.invoker import ToolInvoker
from ..invoke.results import InvocationResult
from ..tools.runner import run_coroutine_sync
from .calls import Declared, GovernedCalls

try:
    from langchain_core.messages import ToolCall
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import BaseTool, ToolException
    from langgraph.types import Command, Interrupt, interrupt
except ImportError as exc:
    raise ImportError("toolkeeper.adapters.langchain needs langchain-core and langgraph; install "
                      "them with pip install 'toolkeeper[langchain]'") from exc

__all__ = ["GovernedTool", "ToolkeeperTools", "decision_of", "edited_arguments"]

FRAMEWORK = "langgraph"
_CALL_ID: ContextVar[str] = ContextVar("toolkeeper_langchain_call_id", default="")


class GovernedTool(BaseTool):
    """One catalog tool as a LangChain tool; ``ToolkeeperTools`` makes them. It runs in a graph
    called either way: ``ainvoke`` / ``astream`` await the door, ``invoke`` / ``stream`` run it
    to completion from the graph's worker thread (an ``interrupt`` stops either)."""

    calls: GovernedCalls
    """The ``GovernedCalls`` it goes through."""
    handle_tool_error: bool = True

    def invoke(self, input: str | dict[str, object] | ToolCall,
               config: RunnableConfig | None = None, **kwargs: object) -> object:
        with _call_id_of(input):
            return super().invoke(input, config, **kwargs)

    async def ainvoke(self, input: str | dict[str, object] | ToolCall,
                      config: RunnableConfig | None = None, **kwargs: object) -> object:
        with _call_id_of(input):
            return await super().ainvoke(input, config, **kwargs)

    def _run(self, *args: object, **kwargs: object) -> str:
        arguments, call_id = _arguments(kwargs), _CALL_ID.get() or _new_call_id()
        result: InvocationResult = run_coroutine_sync(self._first(arguments, call_id))
        if result.status == "pending":
            resumed = self._interrupt(arguments, result)
            approved, message = decision_of(resumed)
            result = run_coroutine_sync(self.calls.decided(
                self.name, arguments, call_id, approved=approved, message=message,
                edited=edited_arguments(resumed)))
        return answer(result)

    async def _arun(self, *args: object, **kwargs: object) -> str:
        arguments, call_id = _arguments(kwargs), _CALL_ID.get() or _new_call_id()
        result = await self._first(arguments, call_id)
        if result.status == "pending":
            resumed = self._interrupt(arguments, result)
            approved, message = decision_of(resumed)
            result = await self.calls.decided(self.name, arguments, call_id,
                                              approved=approved, message=message,
                                              edited=edited_arguments(resumed))
        return answer(result)

    async def _first(self, arguments: dict[str, object], call_id: str) -> InvocationResult:
        """The door's answer to the call; on a resumed run, the stored request it already
        made (pending: the graph's person decides it, nothing is asked twice)."""
        calls: GovernedCalls = self.calls
        found = await calls.open_request(self.name, arguments)
        if found is not None and found.state == "pending":
            return InvocationResult.failed(
                "pending", "waiting for approval", "pending", call_id=call_id, tool=self.name,
                approval_id=found.request.id)
        return await calls.call(self.name, arguments, call_id)

    def _interrupt(self, arguments: dict[str, object], result: InvocationResult) -> object:
        """Stop the graph for the graph's person (LangGraph's ``interrupt``); resumed, what
        the graph was resumed with (their decision)."""
        try:
            asked = interrupt(_request(self, arguments, result, self.calls))
        except KeyError:  # called outside a graph run: nothing to stop and resume
            raise ToolException(
                f"pending: '{self.name}' waits for a person's approval (request "
                f"{result.approval_id}); outside a LangGraph run nothing can stop for it. "
                "Run the tool in a graph with a checkpointer, or decide the request "
                f"({self.calls.invoker.approvals.where(result.approval_id or '')}) and call "
                "again") from None
        return asked


class ToolkeeperTools:
    """The catalog's tools for a LangChain agent or a LangGraph graph, every call through the
    door.

    Args:
        invoker: The door (with ``PersistedApprovalHandler(store)`` a call that needs approval
            interrupts the graph).
        session_id: The conversation's id (the graph's thread); the same one for a run
            resumed after a restart.
        approver: How the graph's person is named in the store and the audit log
            (``"langgraph:user"``).

    Attributes:
        tools: The ``BaseTool``s to give ``create_agent(model, tools)`` or a ``ToolNode``.
    """

    def __init__(self, invoker: ToolInvoker, *, session_id: str | None = None,
                 approver: str | None = None) -> None:
        self.calls = GovernedCalls(invoker, framework=FRAMEWORK, session_id=session_id,
                                   approver=approver)
        self.tools: list[BaseTool] = [self._tool(d) for d in self.calls.declared]

    def _tool(self, declared: Declared) -> GovernedTool:
        return GovernedTool(name=declared.name, description=declared.description,
                            args_schema=dict(declared.parameters), calls=self.calls)

    async def resume_from_store(self, interrupts: Iterable[Interrupt]) -> Command[str] | None:
        """The ``Command`` that resumes the graph with the decisions made on toolkeeper's side,
        for the interrupts that are decided (``None`` when none is yet)."""
        resume: dict[str, object] = {}
        for pending in interrupts:
            value = pending.value if isinstance(pending.value, Mapping) else {}
            approval_id = value.get("approval_id")
            if not isinstance(approval_id, str):
                continue
            decision = (await self.calls.decisions([approval_id])).get(approval_id)
            if decision is None:
                continue
            resume[pending.id] = {"decisions": [_as_hitl(decision, value)]}
        return Command(resume=resume) if resume else None

    def resume_from_store_sync(self, interrupts: Iterable[Interrupt]) -> Command[str] | None:
        """``resume_from_store`` from synchronous code (a graph run with ``invoke``)."""
        return run_coroutine_sync(self.resume_from_store(interrupts))


@contextmanager
def _call_id_of(input: object) -> Iterator[None]:
    """The tool call's id (LangGraph's ``ToolNode`` passes the call itself) for the door's
    call and audit row while the tool runs."""
    call_id = input.get("id") if isinstance(input, dict) and \
        input.get("type") == "tool_call" else None
    token = _CALL_ID.set(str(call_id or _new_call_id()))
    try:
        yield
    finally:
        _CALL_ID.reset(token)


def _new_call_id() -> str:
    return "lc_" + secrets.token_hex(8)


def _arguments(kwargs: dict[str, object]) -> dict[str, object]:
    """The call's arguments: what LangChain passes the tool, less its own run manager and
    config."""
    return {k: v for k, v in kwargs.items() if k not in ("run_manager", "config")}


def _request(tool: BaseTool, arguments: Mapping[str, object], result: InvocationResult,
             calls: GovernedCalls) -> dict[str, object]:
    """What the interrupt carries: HumanInTheLoopMiddleware's request shape, and the stored
    request's id."""
    where = calls.invoker.approvals.where(result.approval_id or "")
    return {"action_requests": [{"name": tool.name, "args": dict(arguments),
                                 "description": f"'{tool.name}' needs a person's approval "
                                 f"(request {result.approval_id}, also decided by {where}); "
                                 "nothing ran yet"}],
            "review_configs": [{"action_name": tool.name,
                                "allowed_decisions": ["approve", "edit", "reject"]}],
            "approval_id": result.approval_id}


def _as_hitl(decision: ApprovalDecision, request: Mapping[str, object]) -> dict[str, object]:
    """A decision made on toolkeeper's side in HumanInTheLoopMiddleware's shape (an edit as
    ``edit`` with its ``edited_action``)."""
    if not decision.approved:
        return {"type": "reject",
                "message": decision.message or f"denied by {decision.approver or 'a person'}"}
    if decision.arguments is None:
        return {"type": "approve"}
    actions = request.get("action_requests")
    first = actions[0] if isinstance(actions, list) and actions else {}
    name = first.get("name", "") if isinstance(first, Mapping) else ""
    return {"type": "edit", "edited_action": {"name": name, "args": decision.arguments}}


def _first_decision(resume: object) -> object:
    if isinstance(resume, Mapping) and isinstance(resume.get("decisions"), list) \
            and resume["decisions"]:
        return resume["decisions"][0]
    return resume


def edited_arguments(resume: object) -> dict[str, object] | None:
    """The arguments a person approved instead of the asked ones: an ``edit`` decision's
    ``edited_action["args"]`` (HumanInTheLoopMiddleware's), else ``None``."""
    decision = _first_decision(resume)
    if not isinstance(decision, Mapping) or decision.get("type") != "edit":
        return None
    action = decision.get("edited_action")
    args = action.get("args") if isinstance(action, Mapping) else None
    return {str(k): v for k, v in args.items()} if isinstance(args, Mapping) else None


def decision_of(resume: object) -> tuple[bool, str]:
    """(approved, message) from what the graph was resumed with: ``{"decisions": [{"type":
    "approve"}]}`` (HumanInTheLoopMiddleware's), ``{"type": "reject", "message": "…"}``,
    ``"approve"``/``"reject"`` or a bool. Anything else is a denial that says what to send."""
    resume = _first_decision(resume)
    if isinstance(resume, bool):
        return resume, ""
    if isinstance(resume, str):
        resume = {"type": resume}
    if isinstance(resume, Mapping) and resume.get("type") == "edit":
        if edited_arguments(resume) is None:
            return False, ("the graph was resumed with an edit without edited_action.args; "
                           "resume with {'type': 'edit', 'edited_action': {'name': ..., "
                           "'args': {...}}}")
        return True, ""
    if isinstance(resume, Mapping) and resume.get("type") in ("approve", "reject"):
        return resume["type"] == "approve", str(resume.get("message") or "")
    return False, (f"the graph was resumed with {resume!r}, which is not a decision; resume "
                   "with {'decisions': [{'type': 'approve'}]} or {'type': 'reject', "
                   "'message': '...'}")


def answer(result: InvocationResult) -> str:
    """A door's result as the tool's output; a refused or failed call raises ``ToolException``,
    which LangChain turns into a ``ToolMessage`` with ``status="error"``."""
    if result.status != "ok":
        raise ToolException(f"{result.error_code or result.status}: {result.text}")
    return result.text
