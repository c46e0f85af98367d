"""The default set: today's settings as policies. Evaluated natively on every call, written as
Cedar for ``policy show`` — and the two, and the approval service's own rule, always agree."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkeeper import Toolbox, tool
from toolkeeper.approval.service import ApprovalService
from toolkeeper.core.context import Caller
from toolkeeper.core.risk import HitlMode, ToolRisk
from toolkeeper.invoke.policy import ChainPolicy
from toolkeeper.policy import Policies, decide_default, default_set_text


def _tool(risk: ToolRisk, mode: HitlMode | None, name: str = "act") -> object:
    def act(path: str) -> str:
        """Act on a path."""
        return path

    return tool(name=name, risk=risk, hitl_mode=mode)(act)


settings_of = st.fixed_dictionaries({
    "risk": st.sampled_from(list(ToolRisk)),
    "mode": st.sampled_from([None, *HitlMode]),
    "ceiling": st.sampled_from([None, *ToolRisk]),
    "unapproved": st.booleans(),
    "chain": st.booleans(),
})


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(settings_of)
def test_the_default_set_decides_as_the_approval_service_and_as_its_cedar_text(case: dict[str, Any]
                                                                                ) -> None:
    made = _tool(case["risk"], case["mode"])
    limits = ChainPolicy(max_risk_unapproved=case["ceiling"],
                         unapproved_tools=frozenset({"act"}) if case["unapproved"] else frozenset())
    native = decide_default(made, limits, chain=case["chain"])  # type: ignore[arg-type]
    asks = ApprovalService.needs_approval(made, policy=limits, chain=case["chain"])  # type: ignore[arg-type]
    assert native.ask is asks
    written = Policies(Toolbox([made]), text={"default.cedar": default_set_text(limits)},
                       defaults=False)
    cedar = written.decide(made, Caller(client="c"), {"path": "x"},  # type: ignore[arg-type]
                           limits=limits, chain=case["chain"])
    assert cedar.outcome == ("ask" if asks else "allow")
    assert native.id in [p.id for p in cedar.policies]


def test_show_writes_the_ceiling_and_the_unapproved_tools_of_the_policy_in_force() -> None:
    text = default_set_text(ChainPolicy(max_risk_unapproved=ToolRisk.HIGH,
                                        unapproved_tools=frozenset({"shell", "file_write"})))
    assert 'resource.level <= 2' in text
    assert '["file_write", "shell"].contains(resource.name)' in text
    assert "if context.code_mode then 0 else 1" in default_set_text(ChainPolicy())
