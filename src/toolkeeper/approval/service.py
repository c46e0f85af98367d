"""``ApprovalService``: request, wait (bounded), decide and resume exactly once — the one place
the approval gate, the CLI, a web page and MCP all go through.

It holds the handler that answers, the store that keeps requests across restarts and the hooks to
tell about it; who needs approval and how long to wait come with each call, from the policy in
force for it (``ChainPolicy``, an ``ApprovalPolicy``). It does not
run tools: ``claim`` hands an approved call back to the invoker, the one door, which runs it and
reports with ``complete``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Literal, Protocol

import anyio
import anyio.to_thread

from ..core.risk import HitlMode, ToolRisk
from ..core.spec import ToolLike
from ..hooks import HookEvent, HookManager
from .handlers import ApprovalHandler, Expires, Rejoins, Releases
from .models import (
    NEVER_S,
    ApprovalDecision,
    ApprovalRequest,
    args_digest,
    as_decision,
    duration,
)
from .store import (
    ApprovalStore,
    FindsOpen,
    GrantsSessions,
    Replays,
    SqliteApprovalStore,
    StoredApproval,
)
from .where import decide_command

__all__ = ["ApprovalPolicy", "ApprovalService", "Claim", "Tasked", "WaitPolicy", "asked_elsewhere",
           "ceiling", "expired_text", "may_ask", "request_ttl", "tasked"]

_ASKED_ELSEWHERE: ContextVar[bool] = ContextVar("toolkeeper_asked_elsewhere", default=False)


@contextmanager
def asked_elsewhere() -> Iterator[None]:
    """Calls made in this context — and the calls they make, such as a code-mode script's —
    do not wait for a person where the person is asked only once the call has answered (an
    MCP client asked with a form, ``mcp/asking.py``): a new BLOCKING request that outlives the
    wait (a stored request with a time to live) is stored and its call answers ``pending`` at
    once, as it would after the wait. A request made again (rejoined) is waited for as
    usual, so an answer given meanwhile is read."""
    token = _ASKED_ELSEWHERE.set(True)
    try:
        yield
    finally:
        _ASKED_ELSEWHERE.reset(token)


@dataclass(frozen=True, kw_only=True)
class Tasked:
    """The call ``call_id``, answered with a task its client polls (an MCP task): nobody
    holds a request open for it, so it waits for its decision as long as its request lives
    (not ``approval_timeout_s``: one call, one outcome, one audit row), and ``rejoined`` is
    told the request it waits on when it rejoined one made before (a new request is told to
    every listener of ``APPROVAL_REQUESTED``)."""

    call_id: str
    rejoined: Callable[[dict[str, object]], Awaitable[None]]


_TASKED: ContextVar[Tasked | None] = ContextVar("toolkeeper_tasked", default=None)


@contextmanager
def tasked(call: Tasked) -> Iterator[None]:
    """The call ``call.call_id`` made in this context is a task (``Tasked``); the calls it
    makes in turn (a code-mode script's) wait as usual."""
    token = _TASKED.set(call)
    try:
        yield
    finally:
        _TASKED.reset(token)


def left_open_at_once(mode: HitlMode, expires_at: float | None) -> bool:
    """The request's half of ``ApprovalService.leaves_open_at_once``: BLOCKING, and it
    outlives the moment."""
    return mode is HitlMode.BLOCKING and expires_at is not None and expires_at > time.time()


class ApprovalPolicy(Protocol):
    """What approval reads of the policy in force for a call: ``ChainPolicy`` is one (the
    invoker passes each call's own, ``Invocation.policy``: a session's over the invoker's)."""

    @property
    def max_risk_unapproved(self) -> ToolRisk | None: ...
    @property
    def unapproved_tools(self) -> frozenset[str]: ...
    @property
    def approval_timeout_s(self) -> float: ...
    @property
    def approval_ttl_s(self) -> float | None: ...
    @property
    def approval_ttl_tools(self) -> Mapping[str, float | Literal["never"]]: ...
    @property
    def hitl_timeout_seconds(self) -> float: ...


@dataclass(frozen=True, kw_only=True)
class WaitPolicy:
    """An ``ApprovalPolicy`` of its own, for the service used without an invoker (the values
    are ``ChainPolicy``'s defaults)."""

    max_risk_unapproved: ToolRisk | None = None
    unapproved_tools: frozenset[str] = frozenset()
    approval_timeout_s: float = 55.0
    approval_ttl_s: float | None = None
    approval_ttl_tools: Mapping[str, float | Literal["never"]] = field(default_factory=dict)
    hitl_timeout_seconds: float = 30.0


def ceiling(policy: ApprovalPolicy, *, chain: bool) -> ToolRisk:
    """The highest risk that runs without asking: the policy's, else SENSITIVE in an ordinary
    session and SAFE in a code-mode chain."""
    if policy.max_risk_unapproved is not None:
        return ToolRisk(policy.max_risk_unapproved)
    return ToolRisk.SAFE if chain else ToolRisk.SENSITIVE


def request_ttl(policy: ApprovalPolicy, mode: HitlMode, tool: ToolLike | None = None,
                asked: float | str | None = None) -> float:
    """How long a request asked in ``mode`` stays approvable: CONTINUE_ON_TIMEOUT's ends at
    ``hitl_timeout_seconds`` (then it is approved); any other's at ``asked`` (the ``@ttl`` of
    the policy that asks), else the tool's own time-to-live — the policy's
    ``approval_ttl_tools`` for it, else its metadata's ``approval_ttl`` —, else
    ``approval_ttl_s`` (a server's call answers 'pending' and is made again), else when the
    call stops waiting (``approval_timeout_s``). ``never`` is ``NEVER_S``."""
    if mode is HitlMode.CONTINUE_ON_TIMEOUT:
        return policy.hitl_timeout_seconds
    own: float | str | None = asked
    if own is None and tool is not None:
        own = policy.approval_ttl_tools.get(tool.name, tool.metadata.approval_ttl)
    if own is not None:
        return NEVER_S if own == "never" else float(own)
    ttl = policy.approval_ttl_s
    return ttl if ttl is not None else policy.approval_timeout_s


def may_ask(tool: ToolLike) -> bool:
    """Whether some policy could make calls of ``tool`` ask: its risk is above SAFE (the
    lowest ceiling there is) or it asks itself. A tool for which this is false never needs
    the approval gate, whatever the session."""
    return tool.risk > ToolRisk.SAFE or _asks(tool)


def _asks(tool: ToolLike) -> bool:
    """The tool itself asks: an explicit HITL mode other than NONE (one only inherited from
    the risk says *how* to ask, not *whether*)."""
    return tool.hitl_explicit and tool.hitl_mode is not HitlMode.NONE


@dataclass(frozen=True, kw_only=True)
class Claim:
    """What ``claim`` found: an approved request to run now, or why it will not run."""

    request: ApprovalRequest | None
    decision: ApprovalDecision | None = None
    """The decision that approved it, when it will run."""
    refusal: Literal["unknown", "mismatch", "pending", "denied", "expired",
                     "already_executed"] | None = None
    message: str = ""


class ApprovalService:
    """Approval requests from asking to the single execution of an approved call.

    It holds no policy of its own: who needs approval and how long a call waits are read from
    the policy each call passes (``Invocation.policy``, a session's own over the invoker's).
    """

    def __init__(self, handler: ApprovalHandler | None = None, *,
                 store: ApprovalStore | None = None, hooks: HookManager | None = None,
                 page_url: str | None = None) -> None:
        self.handler = handler
        self.store = store if store is not None else (
            handler.store if isinstance(handler, Rejoins) else None)
        self.hooks = hooks if hooks is not None else HookManager()
        """Who hears of requests and decisions (a server's MCP face, its metrics): always a
        manager, so a listener subscribes without replacing anything."""
        self.page_url = page_url
        """Where a person decides (the approval page's URL), when there is one: the messages
        of a waiting call name it."""

    @staticmethod
    def needs_approval(tool: ToolLike, *, policy: ApprovalPolicy, chain: bool) -> bool:
        """Whether a call of ``tool`` under ``policy`` asks: the tool is not among the
        policy's ``unapproved_tools``, and its risk is above the ceiling of the session
        (``chain``: a code-mode run's) or the tool itself asks (an explicit HITL mode other
        than NONE)."""
        if tool.name in policy.unapproved_tools:
            return False
        return tool.risk > ceiling(policy, chain=chain) or _asks(tool)

    def where(self, request_id: str) -> str:
        """Where a person decides ``request_id``: its page, or the command that reaches this
        store (``--state-dir DIR`` when the store is not in the default state dir)."""
        if self.page_url:
            return f"{self.page_url.rstrip('/')}/approvals/{request_id}"
        store = self.store
        return decide_command(request_id,
                              store.db if isinstance(store, SqliteApprovalStore) else None)

    def leaves_open_at_once(self, mode: HitlMode, expires_at: float | None) -> bool:
        """Whether a new request of ``mode`` that ends at ``expires_at``, made in an
        ``asked_elsewhere`` context, is left open at once: its call answers ``pending``
        without waiting (a handler that stores it, BLOCKING, and it outlives the moment)."""
        handler: object = self.handler  # an optional ability, declared by the handler
        return isinstance(handler, Rejoins) and left_open_at_once(mode, expires_at)

    async def find_open(self, request: ApprovalRequest) -> StoredApproval | None:
        """The stored request of the same session, tool and arguments that is still pending,
        approved and not yet taken, or recently denied: a call retried (after a restart, or
        after it answered 'pending') rejoins it instead of asking again. ``None`` when the
        store cannot look."""
        store: object = self.store  # an optional ability, declared by the store
        if not isinstance(store, FindsOpen):
            return None
        return await anyio.to_thread.run_sync(store.find_open, request.session_id, request.tool,
                                              request.args_digest)

    async def session_grant(self, session_id: str, tool: str) -> ApprovalDecision | None:
        """A person's "approve for this client" of ``tool`` that still holds for this session,
        as the store knows it (given on any worker or replica sharing it), or ``None``."""
        store: object = self.store
        if not isinstance(store, GrantsSessions):
            return None
        return await anyio.to_thread.run_sync(store.session_grant, session_id, tool)

    async def decide(self, request: ApprovalRequest, mode: HitlMode, *,
                     policy: ApprovalPolicy, rejoin: bool = False,
                     call_id: str | None = None) -> ApprovalDecision:
        """Ask the handler and wait as ``mode`` and the call's ``policy`` say: BLOCKING up to
        ``approval_timeout_s`` (then ``expired``), CONTINUE_ON_TIMEOUT up to
        ``hitl_timeout_seconds`` (then approved, and recorded as such), FIRE_AND_CONTINUE not
        at all. A stored request that outlives the call's wait (``approval_ttl_s``) is left
        open instead: the call answers ``pending`` and is made again. With ``rejoin`` the
        request is already stored (``find_open``) and only waited for. ``call_id``: the call
        that waits (a rejoined request names the call it was made for); a task's (``tasked``)
        waits as long as its request lives."""
        task = _TASKED.get()
        if task is not None and task.call_id != (call_id or request.call_id):
            task = None
        if not rejoin:
            await self._event(HookEvent.APPROVAL_REQUESTED, request.tool, request.session_id,
                              {"request": request.model_dump()})
        elif task is not None:
            await task.rejoined(request.model_dump())
        decision = await self._wait(request, mode, policy.approval_timeout_s, rejoin,
                                    whole=task is not None)
        await self._event(HookEvent.APPROVAL_DECIDED, request.tool, request.session_id,
                          {"decision": decision.model_dump()})
        return decision

    async def _wait(self, request: ApprovalRequest, mode: HitlMode, timeout_s: float,
                    rejoin: bool, *, whole: bool = False) -> ApprovalDecision:
        if mode is HitlMode.FIRE_AND_CONTINUE:
            return await self._announce(request, rejoin)
        handler = self.handler
        if handler is None:
            return ApprovalDecision(request_id=request.id, outcome="denied",
                                    message="no approval handler is configured")
        wait, limit, outlives = _bounds(request, timeout_s, whole=whole)
        if isinstance(handler, Rejoins):
            if not rejoin:  # stored before any wait: a call that does not wait leaves it open
                await anyio.to_thread.run_sync(handler.store.create, request)
                if _ASKED_ELSEWHERE.get() and self.leaves_open_at_once(mode, request.expires_at):
                    return ApprovalDecision(request_id=request.id, outcome="pending",
                                            message="asked at the client")
            with anyio.move_on_after(wait):
                decided = await handler.wait(request.id, handler.wait_s)
                # CONTINUE_ON_TIMEOUT decides at its own time, whatever the handler's wait
                # (unless the server is stopping: then a waiting call answers 'pending')
                # (a task's call waits as long as its request lives, as that request does)
                while (decided.outcome == "pending"
                       and (whole or mode is HitlMode.CONTINUE_ON_TIMEOUT)
                       and not (isinstance(handler, Releases) and handler.released)):
                    decided = await handler.wait(request.id, wait)
                return decided
            if outlives:  # the call stops waiting, the stored request does not
                return ApprovalDecision(request_id=request.id, outcome="pending",
                                        message=f"no decision within {wait:g} s")
        else:
            with anyio.move_on_after(wait):
                return as_decision(await handler.request(request), request)
        if mode is HitlMode.CONTINUE_ON_TIMEOUT:
            decision = ApprovalDecision(request_id=request.id, outcome="approved",
                                        approver="timeout", message=f"approved automatically "
                                        f"after {limit:g} s without an answer")
        else:
            decision = ApprovalDecision(request_id=request.id, outcome="expired",
                                        message=f"nobody decided within {duration(limit)}")
        return await self._final(decision)

    async def _final(self, decision: ApprovalDecision) -> ApprovalDecision:
        """Record a decision the service made itself (expired) so that a late answer cannot
        apply any more; a person's answer that came first stands."""
        store = self.store
        if store is None:
            handler: object = self.handler
            if isinstance(handler, Expires):
                await handler.expire(decision)
            return decision
        if await anyio.to_thread.run_sync(store.decide, decision):
            return decision
        stored = await anyio.to_thread.run_sync(store.get, decision.request_id)
        return stored.decision if stored is not None and stored.decision else decision

    async def _announce(self, request: ApprovalRequest, rejoin: bool) -> ApprovalDecision:
        """FIRE_AND_CONTINUE: the request is stored (the page shows it ran without waiting)
        and approved at once; no handler is needed."""
        decision = ApprovalDecision(request_id=request.id, outcome="approved",
                                    approver="fire_and_continue",
                                    message="announced; ran without waiting")
        if self.store is None:
            return decision
        if not rejoin:
            await anyio.to_thread.run_sync(self.store.create, request)
        return await self._final(decision)

    async def claim(self, approval_id: str, arguments: dict[str, object] | None = None
                    ) -> Claim:
        """Take an approved request for execution, exactly once across processes: refused when
        unknown, undecided, denied, already taken, or when ``arguments`` differ from the
        approved ones."""
        store = self.store
        if store is None:
            return Claim(request=None, refusal="unknown", message="no approval store")
        stored = await anyio.to_thread.run_sync(store.get, approval_id)
        if stored is None:
            return Claim(request=None, refusal="unknown",
                         message=f"no approval request {approval_id!r}")
        request = stored.request
        if arguments is not None and args_digest(arguments) != request.args_digest:
            return Claim(request=request, refusal="mismatch", message=(
                f"the arguments differ from the ones approved in {approval_id}; ask for a new "
                "approval"))
        if stored.state == "pending":
            return Claim(request=request, refusal="pending",
                         message=f"request {approval_id} is still waiting for a decision")
        if stored.state == "expired":
            return Claim(request=request, refusal="expired", message=expired_text(
                request.tool, stored.decision.message if stored.decision else ""))
        if stored.state in ("denied", "skipped"):
            why = stored.decision.message if stored.decision else ""
            return Claim(request=request, refusal="denied",
                         message=f"request {approval_id} was {stored.state}. {why}")
        if not await anyio.to_thread.run_sync(store.claim, approval_id):
            done = await anyio.to_thread.run_sync(store.get, approval_id)
            summary = (done.result or {}) if done is not None else {}
            return Claim(request=request, refusal="already_executed", message=(
                f"request {approval_id} was already executed"
                + (f": {summary.get('text', '')}" if summary else "")))
        return Claim(request=request, decision=stored.decision)

    async def take(self, approval_id: str) -> bool:
        """Take a request approved while its call waited, for that call's execution: a stored
        request is claimed (so a later ``resume`` cannot run it again); ``False`` when another
        process took it first. A request that was never stored is the call's own."""
        if self.store is None:
            return True
        stored = await anyio.to_thread.run_sync(self.store.get, approval_id)
        if stored is None:
            return True
        return bool(await anyio.to_thread.run_sync(self.store.claim, approval_id))

    async def replay(self, approval_id: str) -> dict[str, object] | None:
        """What an approved request's run did, to tell the same call made again (once):
        its first caller may have given up before the answer came. ``None`` when told
        already, or when the store cannot say."""
        store: object = self.store
        if not isinstance(store, Replays):
            return None
        return await anyio.to_thread.run_sync(store.replay, approval_id)

    async def result_of_run(self, approval_id: str, limit_s: float) -> dict[str, object] | None:
        """What an approved request's run did, once the call that took it has run it: told
        as ``replay`` tells it (once). Two calls made the same way that waited on one
        request both wake at its approval; one takes it, and the other waits here for that
        run — as long as a call waits for a decision (the handler's ``wait_s``, at most
        ``limit_s``). ``None`` when the run did not end in that time."""
        handler: object = self.handler  # an optional ability, declared by the handler
        store = self.store
        if store is None or not isinstance(handler, Rejoins):
            return None
        poll_s = float(getattr(handler, "poll_s", 0.1))
        ended = False
        with anyio.move_on_after(min(handler.wait_s, limit_s)):
            while not ended:
                stored = await anyio.to_thread.run_sync(store.get, approval_id)
                ended = stored is None or stored.state not in ("approved", "executing")
                if not ended:
                    await anyio.sleep(poll_s)
        return await self.replay(approval_id) if ended else None

    async def complete(self, approval_id: str, summary: Mapping[str, object]) -> None:
        """Record what the claimed call did."""
        if self.store is not None:
            await anyio.to_thread.run_sync(self.store.complete, approval_id, summary)

    async def _event(self, event: HookEvent, tool: str, session: str,
                     payload: dict[str, object]) -> None:
        if self.hooks.has(event):
            await self.hooks.dispatch(event, {"tool": tool, "session": session, **payload})


def expired_text(tool: str, why: str) -> str:
    """What the model reads of a call nobody decided in time (``why``: the decision's message,
    "nobody decided within 60 min"): it did not run, and calling again asks again."""
    return (f"the call to '{tool}' expired: {why or 'nobody decided in time'}; it did not run; "
            "call it again to ask again (a person is asked anew)")


def _bounds(request: ApprovalRequest, timeout_s: float, *, whole: bool = False
            ) -> tuple[float, float, bool]:
    """(how long a call waits from now, the limit its messages name, whether the request
    outlives that wait): at most the policy's ``approval_timeout_s`` (``whole``: a task's
    call, the request's whole life), and never past the request's own end (its
    ``expires_at``: ``approval_ttl_s``, or CONTINUE_ON_TIMEOUT's ``hitl_timeout_seconds``)."""
    if request.expires_at is None:
        return timeout_s, timeout_s, False
    remaining = max(0.0, request.expires_at - time.time())
    lifetime = round(request.expires_at - request.created_at, 3)
    if whole:
        return remaining, lifetime, False
    return min(timeout_s, remaining), min(timeout_s, lifetime), remaining > timeout_s
