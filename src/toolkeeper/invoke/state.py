"""``Invocation``: the immutable state one call carries through the gates; ``Gate``: one step."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NamedTuple, TypedDict, Unpack

from ..core.call import ToolCall
from ..core.context import ToolContext
from ..core.spec import ToolLike
from ..errors import UnknownToolError
from ..policy.decision import PolicyDecision
from .policy import ChainPolicy
from .results import Envelope, InvocationResult

if TYPE_CHECKING:
    from .session import InvokerSession

__all__ = ["ApprovalTrail", "Gate", "Invocation", "Next", "ProgressSink"]

ProgressSink = Callable[[dict[str, object]], Awaitable[None] | None]


@dataclass(slots=True)
class ApprovalTrail:
    """What a call's approval came to, written by the approval gate as it learns it (the
    request's id as soon as there is one, then the outcome and who decided) and read by the
    record gate, which sits outside it: the one part of a call's state written on the way, so
    that the audit row of a call whose client gave up while it waited still names its request.
    ``resume`` starts it with the approval it runs under."""

    id: str | None = None
    outcome: str | None = None
    approver: str | None = None
    waited_s: float | None = None
    """How long the call waited for the decision (``None``: it did not wait)."""

    ran_digest: str | None = None
    """The digest of the arguments that ran, when a person edited them before approving."""
    edited: tuple[str, ...] = ()
    """The arguments that edit changed."""
    run_with: dict[str, object] | None = None
    """Set by ``resume``: the edited arguments the approved call runs with."""

    def decided(self, outcome: str, approver: str) -> None:
        """Record a final decision (``approver`` empty when nobody said who)."""
        self.outcome, self.approver = outcome, approver or None

    def edit(self, ran_digest: str, edited: list[str]) -> None:
        """Record that the call runs with a person's edit of its arguments."""
        self.ran_digest, self.edited = ran_digest, tuple(edited)

    def described(self) -> str | None:
        """The audit row's decision: the outcome, and an edit's digest and changed names."""
        if self.outcome is None or self.ran_digest is None:
            return self.outcome
        return (f"{self.outcome} with edited arguments (ran {self.ran_digest}; changed: "
                f"{', '.join(self.edited) or 'none'})")


class Changes(TypedDict, total=False):
    """What a gate may change of an ``Invocation`` (``evolve``)."""

    arguments: dict[str, object]
    resolved: dict[str, object] | None
    approval_id: str | None
    decision: PolicyDecision | None


class Invocation(NamedTuple):
    """One call on its way through the pipeline. Immutable: a gate derives a changed copy with
    ``evolve`` (a tuple copy, the cheapest immutable record Python has — this is the hot path).

    Attributes:
        call: The call as it arrived.
        session: The session it belongs to.
        policy: The limits in force for this call, resolved once at the door: the session's
            own (a code-mode run's) over the invoker's. Every gate reads this one.
        tool: The tool, looked up once by the invoker (``None`` when the name is unknown).
        arguments: As received until validated, then validated (``$artifact`` refs still in
            place until the artifact gate swaps in ``resolved``).
        ctx: The context handed to tools that ask for one.
        progress_sink: Where progress steps go.
        resolved: Validated arguments with artifact refs replaced by their content.
        approval_id: The approval that let the call through, if one was needed.
        pre_approved: Set by ``resume``: an approval already granted for these arguments.
        approval: What the call's approval came to (``ApprovalTrail``), shared by every copy
            of this call's ``Invocation``.
        decision: What the policies said (the policy gate's allow or ask); ``None`` when no
            policy gate runs, and the approval gate applies the default set itself.
    """

    call: ToolCall
    session: InvokerSession
    policy: ChainPolicy
    tool: ToolLike | None
    arguments: dict[str, object]
    ctx: ToolContext | None = None
    progress_sink: ProgressSink | None = None
    resolved: dict[str, object] | None = None
    approval_id: str | None = None
    pre_approved: str | None = None
    approval: ApprovalTrail | None = None
    decision: PolicyDecision | None = None

    def evolve(self, **changes: Unpack[Changes]) -> Invocation:
        """A copy with some fields changed."""
        values: list[object] = list(self)
        for name, value in changes.items():
            values[_FIELD[name]] = value
        return tuple.__new__(Invocation, values)

    @property
    def known_tool(self) -> ToolLike:
        """The tool, for the gates inside the lookup (which answers a call of an unknown name
        before any of them runs)."""
        if self.tool is None:
            raise UnknownToolError(f"tool '{self.call.name}' is not known", tool_name=self.call.name)
        return self.tool

    def context(self) -> ToolContext:
        """The call's ``ToolContext`` (made on first need when the caller gave none)."""
        if self.ctx is not None:
            return self.ctx
        return ToolContext(call_id=self.call.id, tool_name=self.call.name,
                           session_id=self.session.id, state=self.session.state,
                           caller=self.session.caller)

    def envelope(self) -> Envelope:
        """The fields every ``InvocationResult`` of this call carries."""
        return {"call_id": self.call.id, "tool": self.call.name,
                "approval_id": self.approval_id or self.pre_approved}


_FIELD = {name: index for index, name in enumerate(Invocation._fields)}

Next = Callable[[Invocation], Awaitable[InvocationResult]]


class Gate:
    """One step of the pipeline: ``await gate(inv, call_next)`` returns the call's result.

    A gate owns its collaborators (given to its constructor) and never reaches back into the
    invoker. It short-circuits by returning (or raising a ``ToolCallError``, which the error
    gate turns into a result); it never mutates its input.
    """

    name: str = "gate"
    after: str | None = None
    """Where an extra gate goes (``ToolInvoker(extra_gates=…)``): right after the gate of this
    name (further from the executor than it is)…"""
    before: str | None = None
    """… or right before the gate of this name; ``"execute"`` puts it innermost."""
    ends_unknown: bool = False
    """Whether this gate answers a call whose tool is unknown: the chain for unknown names
    stops here."""
    only_with: Literal["ctx", "progress_sink"] | None = None
    """The part of a call without which this gate has nothing to do (``"ctx"``: a caller's
    ``ToolContext``; ``"progress_sink"``): the invoker folds the chains of calls that carry
    none without it."""

    def active(self) -> bool:
        """Whether the gate can do anything at all with its collaborators; inactive gates are
        left out of the fold (the order of the rest is unchanged)."""
        return True

    def needed(self, tool: ToolLike) -> bool:
        """Whether the gate can do anything for calls of ``tool``: the invoker folds one chain
        per tool without the gates that cannot. Only what cannot change while ``tool`` and the
        gate live may decide it."""
        return True

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        return await call_next(inv)
