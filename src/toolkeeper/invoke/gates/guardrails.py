"""Guardrails in (before approval) and out (after execution)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...errors import GuardrailTrippedError
from ...hooks import HookEvent
from ..results import InvocationResult
from ..state import Gate, Invocation, Next

__all__ = ["GuardrailInGate", "GuardrailOutGate"]


async def _tripped(inv: Invocation, name: str, reason: str) -> GuardrailTrippedError:
    hooks = inv.invoker.hooks
    if hooks is not None and hooks.has(HookEvent.GUARDRAIL_TRIPPED):
        await hooks.dispatch(HookEvent.GUARDRAIL_TRIPPED,
                             {"tool": inv.call.name, "guardrail": name, "reason": reason})
    return GuardrailTrippedError(f"guardrail '{name}' refused the call to '{inv.call.name}': "
                                 f"{reason}", tool_name=inv.call.name,
                                 details={"guardrail": name})


class GuardrailInGate(Gate):
    name = "guardrails_in"

    def active(self, invoker: Any) -> bool:
        return bool(invoker.guardrails)

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        arguments = inv.arguments
        for guardrail in inv.invoker.guardrails:
            outcome = await guardrail.check_input(inv.tool, arguments)
            if outcome.action == "trip":
                raise await _tripped(inv, guardrail.name, outcome.reason)
            if outcome.action == "redact":
                arguments = dict(outcome.value)
        return await call_next(inv if arguments is inv.arguments else inv.evolve(arguments=arguments))


class GuardrailOutGate(Gate):
    name = "guardrails_out"

    def active(self, invoker: Any) -> bool:
        return bool(invoker.guardrails)

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        result = await call_next(inv)
        tool_result = result.result
        if tool_result is None:
            return result
        for guardrail in inv.invoker.guardrails:
            outcome = await guardrail.check_output(inv.tool, tool_result)
            if outcome.action == "trip":
                raise await _tripped(inv, guardrail.name, outcome.reason)
            if outcome.action == "redact":
                tool_result = outcome.value
        if tool_result is result.result:
            return result
        return replace(result, result=tool_result, text=tool_result.text,
                       structured=tool_result.structured_content)
