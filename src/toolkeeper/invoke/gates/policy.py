"""Policy: allow, ask or deny each call before anything runs — the default set (``[security]``)
with the operator's Cedar policies and stored rules (``policy.Policies``, which this gate holds).

Deny refuses the call here (``policy_denied``, naming the policy and its reason, also in the
audit row); allow and ask travel on to the approval gate in ``Invocation.decision``: allow runs
without asking, ask asks a person as the tool's HITL mode says. The default set reads the call's
own policy (``inv.policy``) each time.
"""

from __future__ import annotations

from functools import partial

import anyio.to_thread

from ...core.spec import ToolLike
from ...errors import ConfigError, PolicyDeniedError, StoreError
from ...extras import MissingExtraError
from ...policy.decision import PolicyDecision
from ...policy.engine import Policies
from ..results import InvocationResult
from ..state import Gate, Invocation, Next

__all__ = ["PolicyGate"]


class PolicyGate(Gate):
    """Asks the policies it holds of each call (before approval): deny refuses, allow and ask
    go on with the decision for the approval gate."""

    name = "policy"

    def __init__(self, policies: Policies | None) -> None:
        self.policies = policies

    def active(self) -> bool:
        """Only with policies besides the default set (which the approval gate applies by
        itself when this gate is left out)."""
        return self.policies is not None and self.policies.governs

    def needed(self, tool: ToolLike) -> bool:
        return True  # a policy may forbid any call, and files change while the door lives

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        assert self.policies is not None
        tool = inv.known_tool
        caller = inv.ctx.caller if inv.ctx is not None else inv.session.caller
        said = inv.ctx if inv.ctx is not None else inv.session  # a script's: its run's request
        wire = {"protocol": said.protocol, "era": said.era}
        try:
            decision = self.policies.decide(tool, caller, inv.arguments, limits=inv.policy,
                                            chain=inv.session.chain, **wire)
            if decision.claims:  # an @once rule decides: spend it in the store first
                decision = await anyio.to_thread.run_sync(partial(
                    self.policies.settle, decision, tool, caller, inv.arguments,
                    limits=inv.policy, chain=inv.session.chain, **wire))
        except (ConfigError, MissingExtraError, StoreError) as exc:
            raise PolicyDeniedError(f"the call to '{tool.name}' is refused: the policies cannot "
                                    f"be read ({exc}); the operator must fix them",
                                    tool_name=tool.name) from exc
        trail = inv.approval
        if decision.outcome == "deny":
            if trail is not None:
                trail.decided(f"policy_denied: {_ids(decision)}", "policy")
            raise PolicyDeniedError(decision.message(tool.name), tool_name=tool.name,
                                    details={"policies": [p.id for p in decision.policies]})
        if decision.outcome == "allow" and not decision.by_default_set and trail is not None \
                and inv.pre_approved is None:
            trail.decided(f"allowed by {_ids(decision)}", "policy")
        return await call_next(inv.evolve(decision=decision))


def _ids(decision: PolicyDecision) -> str:
    return ", ".join(p.id for p in decision.policies) or "no permit (deny by default)"
