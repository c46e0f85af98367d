"""Timeout: the tool's own timeout, the policy's, and what is left of the session's total."""

from __future__ import annotations

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
            with anyio.fail_after(limit):
                return await call_next(inv)
        except TimeoutError:
            raise ToolTimeoutError(
                f"tool '{inv.call.name}' did not finish within {limit:g} s and was stopped; it may "
                "have had partial effects", tool_name=inv.call.name) from None
