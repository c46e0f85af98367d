"""Guardrails in (before approval) and out (after execution)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from ...core.results import ToolResult
from ...errors import GuardrailTrippedError, UsageError
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
        arguments, tool = inv.arguments, inv.known_tool
        for guardrail in self.guardrails:
            outcome = await guardrail.check_input(tool, arguments)
            if outcome.action == "trip":
                raise await _tripped(inv, self.hooks, guardrail.name, outcome.reason)
            if outcome.action == "redact":
                if not isinstance(outcome.value, Mapping):
                    raise UsageError(f"guardrail '{guardrail.name}' redacted the arguments of "
                                     f"'{tool.name}' with a {type(outcome.value).__name__}; "
                                     "redact(...) them with a dict")
                arguments = {str(k): v for k, v in outcome.value.items()}
        return await call_next(inv if arguments is inv.arguments else inv.evolve(arguments=arguments))


class GuardrailOutGate(_GuardrailGate):
    name = "guardrails_out"

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        result = await call_next(inv)
        if not result.ran:
            return result
        tool_result, tool = result.result, inv.known_tool
        for guardrail in self.guardrails:
            outcome = await guardrail.check_output(tool, tool_result)
            if outcome.action == "trip":
                raise await _tripped(inv, self.hooks, guardrail.name, outcome.reason)
            if outcome.action == "redact":
                if not isinstance(outcome.value, ToolResult):
                    raise UsageError(f"guardrail '{guardrail.name}' redacted the result of "
                                     f"'{tool.name}' with a {type(outcome.value).__name__}; "
                                     "redact(...) it with a ToolResult")
                tool_result = outcome.value
        return result if tool_result is result.result else replace(result, result=tool_result)
