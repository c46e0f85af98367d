"""Who may decide what: deciding an approval request is itself governed by the policies — the
Cedar action ``decide``, the operator as principal (``Operator::"NAME"``), the request's tool as
resource and the request as the card shows it as context. The default set lets every operator
decide everything; a team narrows it with a ``forbid`` (only ``finance`` decides
``payments-*``). The page shows a person only the requests they may decide and the API refuses
a decision they may not make (403, naming the policy). ``toolkeeper approvals decide`` acts as
the state dir's owner and is not asked.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..approval.store import StoredApproval
from ..core.context import Caller
from ..errors import ConfigError, StoreError
from ..extras import MissingExtraError
from ..policy.decision import PolicyDecision
from ..policy.engine import Policies
from .clients import OPERATOR, operator_name
from .views import client_of

__all__ = ["Deciders", "approver_of"]


def approver_of(caller: Caller) -> str:
    """How a decision records who made it: ``operator:NAME``."""
    return f"operator:{operator_name(caller)}"


@dataclass(frozen=True)
class Deciders:
    """The ``decide`` check over ``policies`` (``None``: everyone who is an operator decides
    everything)."""

    policies: Policies | None = None

    def judge(self, caller: Caller, stored: StoredApproval) -> PolicyDecision | None:
        """The policies' answer for ``caller`` deciding ``stored`` (``None``: not governed)."""
        if self.policies is None or caller.client != OPERATOR:
            return None
        request = stored.request
        found = self.policies.catalog.get(request.tool)
        return self.policies.may_decide(
            operator_name(caller), tool=request.tool, found=found, risk=request.risk.value,
            client=client_of(request.session_id), reason=request.reason,
            arguments=request.arguments, via=caller.via, scopes=caller.scopes)

    def refusal(self, caller: Caller, stored: StoredApproval) -> str | None:
        """Why ``caller`` may not decide ``stored``; ``None`` when they may. When the policies
        cannot be read, nobody decides until the operator fixes them."""
        try:
            answer = self.judge(caller, stored)
        except (ConfigError, MissingExtraError, StoreError) as exc:
            return (f"the policies cannot be read ({exc}); nobody decides until the operator "
                    "fixes them")
        if answer is None or answer.outcome != "deny":
            return None
        who, tool = operator_name(caller), stored.request.tool
        why = (", ".join(p.describe() for p in answer.forbids) + " forbids it"
               if answer.forbids else "no policy permits it (without the default set, permit "
               'it: permit (principal, action == Action::"decide", resource);)')
        return (f"operator {who!r} may not decide requests for '{tool}': {why}. An operator "
                f"the decide policies allow must decide it (or change those policies: "
                f"toolkeeper policy explain)")

    def may(self, caller: Caller, stored: StoredApproval) -> bool:
        return self.refusal(caller, stored) is None
