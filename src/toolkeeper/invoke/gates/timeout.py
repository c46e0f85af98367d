"""Timeout: the tool's own timeout, the policy's, and what is left of the session's total."""

from __future__ import annotations

import asyncio

import anyio

from ...errors import ToolTimeoutError
from ..results import InvocationResult
from ..state import Gate, Invocation, Next

__all__ = ["TimeoutGate"]


class TimeoutGate(Gate):
    name = "timeout"

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        policy = inv.invoker.policy
        limit = getattr(inv.tool.metadata, "timeout", None) or policy.call_timeout_s
        limit = max(0.0, min(limit, inv.session.remaining_s()))
        try:
            if _on_asyncio():
                return await _asyncio_deadline(call_next(inv), limit)
            with anyio.fail_after(limit):
                return await call_next(inv)
        except TimeoutError:
            raise ToolTimeoutError(
                f"tool '{inv.call.name}' did not finish within {limit:g} s and was stopped; it may "
                "have had partial effects", tool_name=inv.call.name) from None


def _on_asyncio() -> bool:
    try:
        return asyncio.current_task() is not None
    except RuntimeError:
        return False


async def _asyncio_deadline(awaitable: object, limit: float) -> InvocationResult:
    """``asyncio.timeout`` without its per-call overhead: one timer handle, cancelled after.

    The timer cancels the current task; only a cancellation the timer caused becomes a
    ``TimeoutError`` — any other cancellation propagates untouched.
    """
    task = asyncio.current_task()
    assert task is not None
    fired = False

    def expire() -> None:
        nonlocal fired
        fired = True
        task.cancel()

    handle = asyncio.get_running_loop().call_later(limit, expire)
    try:
        return await awaitable  # type: ignore[misc, no-any-return]
    except asyncio.CancelledError:
        if fired and task.uncancel() == 0:
            raise TimeoutError from None
        raise
    finally:
        handle.cancel()
