"""Approval handlers: who answers an ``ApprovalRequest``."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import anyio.to_thread

from .models import ApprovalAnswer, ApprovalDecision, ApprovalRequest, as_decision

if TYPE_CHECKING:
    from rich.console import Console

    from .store import ApprovalStore

__all__ = [
    "ApprovalHandler",
    "AutoApprovalHandler",
    "CallbackApprovalHandler",
    "CliApprovalHandler",
    "Expires",
    "Rejoins",
    "Releases",
]


@runtime_checkable
class ApprovalHandler(Protocol):
    """Answers approval requests. ``request`` may wait; the invoker bounds the wait.

    It answers an ``ApprovalDecision``, or an outcome (``ApprovalDecision.APPROVED``,
    ``DENIED``, ``SKIPPED``), its string (``"approved"``) or a bool."""

    async def request(self, request: ApprovalRequest) -> ApprovalAnswer: ...


@runtime_checkable
class Rejoins(Protocol):
    """A handler that keeps its requests in a store and can wait for one again: the service
    stores each request there and waits through ``wait`` (up to ``wait_s``, and never longer
    than the call's policy lets it: ``math.inf`` leaves the whole wait to the policy), a call
    made again rejoins its open request, and CONTINUE_ON_TIMEOUT waits past the handler's own
    wait. ``PersistedApprovalHandler`` (and so ``WebApprovalHandler``) declare it."""

    store: ApprovalStore
    wait_s: float

    async def wait(self, request_id: str, wait_s: float) -> ApprovalDecision: ...


@runtime_checkable
class Releases(Protocol):
    """A handler whose waits can all be ended at once (a server stopping): each answers
    ``pending``, and so does every later one."""

    released: bool

    def release(self) -> None: ...


@runtime_checkable
class Expires(Protocol):
    """A handler told when the invoker stops waiting, so a late answer cannot apply."""

    async def expire(self, decision: ApprovalDecision) -> None: ...


class AutoApprovalHandler:
    """Approves everything, or decides by a rule (for tests and trusted automation).

    ``rule(request)`` returns ``True``/``False``, an outcome (``ApprovalDecision.DENIED``, or
    its string) or a full ``ApprovalDecision``.
    """

    def __init__(
        self, approve: bool = True,
        rule: Callable[[ApprovalRequest], ApprovalAnswer] | None = None,
    ) -> None:
        self.approve = approve
        self.rule = rule

    async def request(self, request: ApprovalRequest) -> ApprovalDecision:
        verdict: ApprovalAnswer = self.approve if self.rule is None else self.rule(request)
        return as_decision(verdict, request, approver="auto")


class CallbackApprovalHandler:
    """Asks a function (sync or async) that returns a decision, an outcome (or its string) or a
    bool; returning nothing denies."""

    def __init__(self, callback: Callable[[ApprovalRequest], object]) -> None:
        self.callback = callback

    async def request(self, request: ApprovalRequest) -> ApprovalDecision:
        answer = self.callback(request)
        if inspect.isawaitable(answer):
            answer = await answer
        if answer is None or (isinstance(answer, int) and not isinstance(answer, bool)):
            answer = bool(answer)  # nothing denies; a number counts as its truth
        return as_decision(answer, request, approver="callback")


class CliApprovalHandler:
    """Asks on the terminal with a rich prompt; without a terminal it denies and says why."""

    def __init__(self, *, console: Console | None = None, is_tty: Callable[[], bool] | None = None,
                 ask: Callable[[str], str] | None = None) -> None:
        from rich.console import Console

        self.console = console or Console(stderr=True)
        self._is_tty = is_tty or (lambda: sys.stdin.isatty())
        self._ask = ask

    async def request(self, request: ApprovalRequest) -> ApprovalDecision:
        if not self._is_tty():
            return ApprovalDecision(
                request_id=request.id, outcome="denied", approver="cli",
                message="no terminal to ask for approval; run interactively or configure "
                        "another approval handler")
        answer = await anyio.to_thread.run_sync(self._prompt, request)
        outcome = {"y": "approved", "s": "approved", "n": "denied"}.get(answer, "denied")
        return ApprovalDecision(request_id=request.id, outcome=outcome,
                                approver="cli", scope="session" if answer == "s" else "once")

    def _prompt(self, request: ApprovalRequest) -> str:
        from rich.markup import escape
        from rich.panel import Panel
        from rich.pretty import Pretty
        from rich.prompt import Prompt

        self.console.print(Panel(Pretty(request.arguments), title=f"[bold]{escape(request.tool)}"
                                 f"[/] wants to run (risk {request.risk.value})",
                                 subtitle=escape(request.reason) or None))
        if self._ask is not None:
            return self._ask("Approve? [y]es / [s]ession / [n]o").strip().lower()[:1]
        return Prompt.ask(escape("Approve? [y]es / [s]ession / [n]o"), choices=["y", "s", "n"],
                          default="n", console=self.console)


