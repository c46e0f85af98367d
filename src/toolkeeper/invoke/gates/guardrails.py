"""Guardrails in (before approval) and out (after execution)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ...errors import GuardrailTrippedError
from ...guardrails.base import Guardrail
from ...hooks import HookEvent, HookManager
from ..results import InvocationResult
from ..state import Gate, Invocation, Next

__all__ = ["GuardrailInGate", "GuardrailOutGate"]


async def _tripped(inv: Invocation, hooks: HookManager | None, name: str, reason: str
                   ) -> GuardrailTrippedError:
    if hooks is not None and hooks.has(HookEvent.GUARDRAIL_TRIPPED):
        await hooks.dispatch(HookEvent.GUARDRAIL_TRIPPED,
                             {"tool": inv.call.name, "guardrail": name, "reason": reason})
    return GuardrailTrippedError(f"guardrail '{name}' refused the call to '{inv.call.name}': "
                                 f"{reason}", tool_name=inv.call.name,
                                 details={"guardrail": name})


class _GuardrailGate(Gate):
    def __init__(self, guardrails: Sequence[Guardrail], hooks: HookManager | None = None) -> None:
        self.guardrails = tuple(guardrails)
        self.hooks = hooks

    def active(self) -> bool:
        return bool(self.guardrails)


class GuardrailInGate(_GuardrailGate):
    name = "guardrails_in"

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        arguments = inv.arguments
        for guardrail in self.guardrails:
            outcome = await guardrail.check_input(inv.tool, arguments)
            if outcome.action == "trip":
                raise await _tripped(inv, self.hooks, guardrail.name, outcome.reason)
            if outcome.action == "redact":
                arguments = dict(outcome.value)
        return await call_next(inv if arguments is inv.arguments else inv.evolve(arguments=arguments))


class GuardrailOutGate(_GuardrailGate):
    name = "guardrails_out"

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        result = await call_next(inv)
        if not result.ran:
            return result
        tool_result = result.result
        for guardrail in self.guardrails:
            outcome = await guardrail.check_output(inv.tool, tool_result)
            if outcome.action == "trip":
                raise await _tripped(inv, self.hooks, guardrail.name, outcome.reason)
            if outcome.action == "redact":
                tool_result = outcome.value
        return result if tool_result is result.result else replace(result, result=tool_result)
