"""Timeout: the tool's own timeout, the policy's, and what is left of the session's total."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Generator

from ...errors import ToolTimeoutError
from ..results import InvocationResult
from ..state import Gate, Invocation, Next

__all__ = ["TimeoutGate"]


class TimeoutGate(Gate):
    """The tool's own limit, else the call's policy's (a code-mode run's own per-call limit),
    never past what is left of the session's total."""

    name = "timeout"

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        limit = inv.known_tool.metadata.timeout or inv.policy.call_timeout_s
        limit = max(0.0, min(limit, inv.session.remaining_s()))
        loop = asyncio.get_running_loop()  # the door runs on asyncio
        try:
            return await _Deadline(call_next(inv), loop.time() + limit, loop)
        except TimeoutError:
            raise ToolTimeoutError(
                f"tool '{inv.call.name}' did not finish within {limit:g} s and was stopped; it may "
                "have had partial effects", tool_name=inv.call.name) from None


class _Deadline:
    """Await a coroutine under an absolute deadline, arming the timer only if it suspends.

    A coroutine that finishes without ever yielding to the loop cannot be interrupted by any
    timer (the loop never runs), so it needs none; most tool calls of the hot path are like that.
    The deadline is fixed when the gate is entered, so arming late never extends it. The timer
    cancels the current task; only a cancellation the timer caused becomes a ``TimeoutError`` —
    any other cancellation propagates untouched.
    """

    __slots__ = ("awaitable", "deadline", "fired", "loop", "task")

    def __init__(self, awaitable: Awaitable[InvocationResult], deadline: float,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.awaitable = awaitable
        self.deadline = deadline
        self.loop = loop
        self.fired = False
        self.task: asyncio.Task[object] | None = None

    def _expire(self) -> None:
        self.fired = True
        if self.task is not None:
            self.task.cancel()

    def __await__(self) -> Generator[object, object, InvocationResult]:
        coro = self.awaitable.__await__()
        try:
            yielded = coro.send(None)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        self.task = asyncio.current_task()
        handle = self.loop.call_at(self.deadline, self._expire)
        try:
            while True:
                try:
                    value = yield yielded
                except GeneratorExit:
                    coro.close()
                    raise
                except BaseException as exc:
                    yielded = coro.throw(exc)
                else:
                    yielded = coro.send(value)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        except asyncio.CancelledError:
            if self.fired and self.task is not None and self.task.uncancel() == 0:
                raise TimeoutError from None
            raise
        finally:
            handle.cancel()
