"""The door's policies over what a server offers besides tools: each ``resources/read`` and
``prompts/get`` — of this server's own or relayed from the gateway's upstreams — is decided
(``Policies.decide_offer``) before anything is read. A forbid, or deny by default, refuses it
with a protocol error naming the policy and its reason; a person is never asked about a read.
A refused read, get, subscription or completion is a row of the audit log (``refused_entry``),
as a refused tool call is; a listing that leaves it out is not.
"""

from __future__ import annotations

import hashlib
import json
import time

from mcp.shared.exceptions import MCPError

from ..core.context import Caller
from ..errors import ConfigError, StoreError
from ..extras import MissingExtraError
from ..invoke.audit import AuditEntry, redact_arguments
from ..policy.engine import Policies
from ..policy.schema import GET_PROMPT, READ_RESOURCE
from .wire import INVALID_PARAMS, Ctx, era_of

__all__ = ["check_prompt", "check_resource", "refused_entry"]


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


def refused_entry(session_id: str, method: str, target: dict[str, str], refused: MCPError
                  ) -> AuditEntry:
    """The audit row of a refused ``method`` (``resources/read``, ``prompts/get``, …) on
    ``target`` (its URI or name and the upstream relaying it): status ``denied``, the reason
    and the policies that fired, as a refused tool call's row says them."""
    data = refused.error.data if isinstance(refused.error.data, dict) else {}
    policies = ", ".join(str(p) for p in data.get("policies") or ()) or "the policies"
    reason = str(data.get("reason") or "policy_unreadable")
    shown = redact_arguments(target)
    return AuditEntry(
        ts=time.time(), call_id="", session_id=session_id, tool=method,
        args_digest=hashlib.sha256(json.dumps(target, sort_keys=True).encode()).hexdigest(),
        arguments=shown if isinstance(shown, dict) else {}, status="denied",
        error_code=reason, duration_ms=0.0, decision=f"{reason}: {policies}")
