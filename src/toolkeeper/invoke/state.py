"""``Invocation``: the immutable state one call carries through the gates."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from ..core.call import ToolCall
from ..core.context import ToolContext
from .results import InvocationResult

if TYPE_CHECKING:
    from .invoker import ToolInvoker
    from .session import InvokerSession

__all__ = ["Gate", "Invocation", "Next"]

ProgressSink = Callable[[dict[str, Any]], Awaitable[None] | None]


@dataclass(kw_only=True, slots=True)
class Invocation:
    """One call on its way through the pipeline. Gates derive changed copies with ``evolve`` and
    never assign to an invocation they were given (not frozen only because freezing costs a
    microsecond on every call of the hot path).

    Attributes:
        call: The call as it arrived.
        session: The session it belongs to.
        invoker: The invoker running it.
        ctx: The context handed to tools that ask for one.
        tool: The tool, once looked up.
        arguments: The arguments: as received until validated, then validated (with
            ``$artifact`` refs still in place until the artifact gate swaps in ``resolved``).
        resolved: Validated arguments with artifact refs replaced by their content.
        approval_id: The approval that let the call through, if one was needed.
        pre_approved: Set by ``resume``: an approval already granted for these arguments.
    """

    call: ToolCall
    session: InvokerSession
    invoker: ToolInvoker
    ctx: ToolContext | None = None
    progress_sink: ProgressSink | None = None
    tool: Any = None
    arguments: dict[str, Any] = field(default_factory=dict)
    resolved: dict[str, Any] | None = None
    approval_id: str | None = None
    pre_approved: str | None = None

    def evolve(self, **changes: Any) -> Invocation:
        """A copy with some fields changed (the hot path avoids ``dataclasses.replace``)."""
        new = object.__new__(Invocation)
        new.call, new.session, new.invoker = self.call, self.session, self.invoker
        new.ctx, new.progress_sink, new.tool = self.ctx, self.progress_sink, self.tool
        new.arguments, new.resolved = self.arguments, self.resolved
        new.approval_id, new.pre_approved = self.approval_id, self.pre_approved
        for name, value in changes.items():
            setattr(new, name, value)
        return new

    def context(self) -> ToolContext:
        """The call's ``ToolContext`` (made on first need when the caller gave none)."""
        if self.ctx is not None:
            return self.ctx
        return ToolContext(call_id=self.call.id, tool_name=self.call.name,
                           session_id=self.session.id, state=self.session.state)


_FIELDS = tuple(f.name for f in fields(Invocation))
# ``evolve`` copies the fields one by one for speed; a field added to the class must be added
# there too (a test compares the two).
Next = Callable[[Invocation], Awaitable[InvocationResult]]


class Gate:
    """One step of the pipeline: ``await gate(inv, call_next)`` returns the call's result.

    A gate short-circuits by returning (or raising a ``ToolCallError``, which the error gate
    turns into a result); it never mutates its input.
    """

    name: str = "gate"

    def active(self, invoker: ToolInvoker) -> bool:
        """Whether the gate can do anything for this invoker; inactive gates are left out of
        the fold (the order of the rest is unchanged)."""
        return True

    def needed(self, invoker: ToolInvoker, tool: Any) -> bool:
        """Whether the gate can do anything for calls of ``tool``: the invoker folds one chain
        per tool without the gates that cannot (the order of the rest is unchanged). Only what
        cannot change while ``tool`` and the invoker live may decide it."""
        return True

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        return await call_next(inv)
