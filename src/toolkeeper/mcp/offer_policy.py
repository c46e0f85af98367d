"""The door's policies over what a server offers besides tools: each ``resources/read`` and
``prompts/get`` — of this server's own or relayed from the gateway's upstreams — is decided
(``Policies.decide_offer``) before anything is read. A forbid, or deny by default, refuses it
with a protocol error naming the policy and its reason; a person is never asked about a read.
"""

from __future__ import annotations

from mcp.shared.exceptions import MCPError

from ..core.context import Caller
from ..errors import ConfigError, StoreError
from ..extras import MissingExtraError
from ..policy.engine import Policies
from ..policy.schema import GET_PROMPT, READ_RESOURCE
from .wire import INVALID_PARAMS, Ctx, era_of

__all__ = ["check_prompt", "check_resource"]


def check_resource(policies: Policies | None, ctx: Ctx, caller: Caller, uri: str,
                   server: str) -> None:
    """Refuse reading ``uri`` (relayed from ``server``, empty for this server's own) when
    the policies deny it.

    Raises:
        MCPError: denied, naming the policies; or the policies cannot be read.
    """
    _check(policies, ctx, caller, READ_RESOURCE, uri, server, f"reading resource {uri!r}")


def check_prompt(policies: Policies | None, ctx: Ctx, caller: Caller, name: str,
                 server: str) -> None:
    """Refuse getting the prompt ``name`` (relayed from ``server``) when the policies deny
    it.

    Raises:
        MCPError: denied, naming the policies; or the policies cannot be read.
    """
    _check(policies, ctx, caller, GET_PROMPT, name, server, f"getting prompt {name!r}")


def _check(policies: Policies | None, ctx: Ctx, caller: Caller, action: str, name: str,
           server: str, what: str) -> None:
    if policies is None or not policies.governs:
        return  # the default set alone serves every read
    try:
        decision = policies.decide_offer(action, name, caller, server=server,
                                         protocol=ctx.protocol_version, era=era_of(ctx))
    except (ConfigError, MissingExtraError, StoreError) as exc:
        raise MCPError(code=INVALID_PARAMS, message=f"{what} is refused: the policies cannot "
                       f"be read ({exc}); the operator must fix them") from exc
    if decision.outcome == "deny":
        raise MCPError(code=INVALID_PARAMS, message=decision.refusal(action, what),
                       data={"reason": "policy_denied",
                             "policies": [p.id for p in decision.policies]})
