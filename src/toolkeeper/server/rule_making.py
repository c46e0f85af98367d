"""A rule made from a decision: what "allow similar" / "forbid similar" proposes for one
request, and the stored rule it becomes once the person has chosen (and perhaps edited it).

What the person chooses (``RuleChoice``): the effect, this client or any client, the arguments
that matter (each a value or a ``*`` pattern), how long (``once``, ``1h``, ``8h``, ``24h``,
``revoked``) and, if they edited it, the Cedar text. Whatever they wrote, the rule saved is no
wider than the request they saw (``policy.proposal.narrow``) and checks against the catalog's
schema (``Policies.check_with``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ..approval.store import StoredApproval
from ..core.spec import ToolLike
from ..errors import ConfigError
from ..policy.engine import Policies
from ..policy.proposal import Pinned, Proposal, expiry_of, narrow, plain_name, propose, testable
from ..policy.schema import args_type, digests_type, value_digest
from ..policy.source import parse_text
from ..policy.store import PolicyRule
from .views import client_of

__all__ = ["PINNED", "RuleChoice", "choice_of", "matching", "pinned_args", "proposal_text",
           "rule_args", "rule_json", "rule_of", "shown_args"]


@dataclass(frozen=True, kw_only=True)
class RuleChoice:
    """What the person chose for the rule (see the module)."""

    effect: Literal["permit", "forbid"] = "permit"
    any_client: bool = False
    args: Mapping[str, object] | None = None
    """The arguments that matter; ``None``: every argument the rule can test, as sent."""
    duration: str = "once"
    text: str = ""
    reason: str = ""


def choice_of(body: object, *, approve: bool) -> RuleChoice:
    """A ``RuleChoice`` from the API's ``rule`` object: ``effect`` (``permit`` / ``forbid``;
    by default the decision's), ``client`` (``this`` / ``any``), ``args``, ``for``, ``text``,
    ``reason``.

    Raises:
        ConfigError: a field of the wrong kind.
    """
    if not isinstance(body, dict):
        raise ConfigError('"rule" must be an object: {"for": "1h", "client": "this", '
                          '"args": {"path": "reports/*"}} or {"text": "CEDAR"}')
    effect = body.get("effect", "permit" if approve else "forbid")
    client = body.get("client", "this")
    args = body.get("args")
    if effect not in ("permit", "forbid") or client not in ("this", "any") or not (
            args is None or isinstance(args, dict)):
        raise ConfigError('rule: "effect" is permit or forbid, "client" is this or any, '
                          '"args" an object of argument names to values or "*" patterns')
    return RuleChoice(effect=effect, any_client=client == "any", args=args,
                      duration=str(body.get("for", "once")), text=str(body.get("text") or ""),
                      reason=str(body.get("reason") or "")[:500])


PINNED = "exactly as sent"
"""What the page's field says of an argument a rule takes by its digest."""


def shown_args(stored: StoredApproval, policies: Policies | None = None
               ) -> dict[str, object]:
    """The arguments a rule names, for the page: a value it tests as the card showed it
    (strings, whole numbers, true/false), else ``PINNED`` (see ``pinned_args``)."""
    pinned = pinned_args(stored, policies)
    return {name: PINNED if name in pinned else value
            for name, value in stored.request.arguments.items() if plain_name(name)}


def pinned_args(stored: StoredApproval, policies: Policies | None = None) -> list[str]:
    """The arguments a rule takes exactly as sent, by their digest: objects, lists, decimals,
    numbers past 64 bits, null, and any argument the tool's schema gives a type Cedar cannot
    hold (with ``policies``, whose catalog has the tool) — the rule language cannot test them
    piece by piece, and a rule that left them out would allow every value."""
    request = stored.request
    tool = policies.catalog.get(request.tool) if policies is not None else None
    attributes = args_type(tool).get("attributes") if tool is not None else None
    typed = set(attributes) if isinstance(attributes, dict) else None
    return sorted(name for name, value in request.arguments.items() if plain_name(name)
                  and (not testable(value) or (typed is not None and name not in typed)))


def rule_args(stored: StoredApproval, given: Mapping[str, object] | None,
              policies: Policies | None = None) -> dict[str, object]:
    """The arguments the rule tests: ``given`` (every one the rule can name when ``None``),
    each argument the rule cannot test as sent pinned to its value.

    Raises:
        ConfigError: a name the request does not have, or a value other than the one sent
            for an argument that is pinned.
    """
    sent = stored.request.arguments
    chosen = {n: v for n, v in sent.items() if plain_name(n)} if given is None else dict(given)
    unknown = sorted(set(chosen) - set(sent))
    if unknown:
        raise ConfigError(f"the request has no argument {unknown[0]!r}; a rule tests the "
                          "arguments the card shows: " + ", ".join(sorted(sent)))
    for name in set(chosen) & set(pinned_args(stored, policies)):
        if not isinstance(chosen[name], Pinned) and chosen[name] not in (sent[name], PINNED):
            raise ConfigError(f"argument {name!r} is taken exactly as sent (the rule language "
                              "cannot test it piece by piece): give it as sent, or leave it "
                              "out of the rule")
        chosen[name] = Pinned(value_digest(sent[name]))
    return chosen


def proposal_text(stored: StoredApproval, choice: RuleChoice, policies: Policies) -> str:
    """The Cedar text the card proposes for ``choice``: an argument it cannot test as sent
    is pinned by its digest, and an argument whose name a rule cannot spell pins the whole
    call — never a rule that leaves an argument out without the person choosing so."""
    request = stored.request
    args = rule_args(stored, choice.args, policies)
    tool = policies.catalog.get(request.tool)
    declared = _declared(tool) if tool is not None else {}
    required = {name for name, needed in declared.items() if needed}
    _, once = expiry_of(choice.duration)
    odd = any(not plain_name(name) for name in request.arguments)
    return propose(Proposal(
        effect=choice.effect, tool=request.tool,
        client="" if choice.any_client else client_of(request.session_id), args=args,
        optional=set(args) - required, once=once, reason=choice.reason,
        call_digest=value_digest(request.arguments) if odd else "",
        absent=set(declared) - set(request.arguments)))


def _declared(tool: ToolLike) -> dict[str, bool]:
    """The tool's arguments, each with whether it is required."""
    attributes = digests_type(tool).get("attributes")
    return {name: bool(kind.get("required", True))
            for name, kind in (attributes.items() if isinstance(attributes, dict) else ())
            if isinstance(kind, dict)}


def rule_of(stored: StoredApproval, choice: RuleChoice, policies: Policies, *,
            author: str, decision: str | None = None) -> PolicyRule:
    """The stored rule for ``choice`` on ``stored`` (checked, not yet saved); with
    ``decision`` (``approve`` / ``deny``), one whose effect goes with it: a permit rule
    approves this call and a forbid rule denies it, never the other way round.

    Raises:
        ConfigError: it is wider than the request, does not parse, does not check against
            the catalog, or its effect is not the decision's (the message says what to change).
    """
    request = stored.request
    expires, once = expiry_of(choice.duration)
    text = choice.text.strip() or proposal_text(stored, choice, policies)
    if once and "@once" not in text:
        text = "@once\n" + text
    text = narrow(text, tool=request.tool, client=client_of(request.session_id),
                  shown=set(request.arguments))
    said = parse_text(text, "the rule", stored=True)[0].matched
    if decision is not None:
        matching(said.effect, decision)
    verb = "allowed" if said.effect == "permit" else "forbidden"
    rule = PolicyRule(id=PolicyRule.new_id(), cedar=text, author=author,
                      reason=said.reason or choice.reason
                      or f"{verb} by {author} from request {request.id}",
                      created=time.time(), expires=expires)
    policies.check_with(rule)
    return rule


def matching(effect: str, decision: str) -> None:
    """Refuse a rule whose effect is not the decision's (``permit`` with ``approve``,
    ``forbid`` with ``deny``).

    Raises:
        ConfigError: they differ; the message names both and what to change.
    """
    wanted = {"approve": "permit", "deny": "forbid"}.get(decision)
    if effect == wanted:
        return
    goes = "approve" if effect == "permit" else "deny"
    raise ConfigError(
        f"the rule is a {effect} rule but the decision is {decision or 'neither'}: a {effect} "
        f"rule goes with {goes} only (a forbid rule never approves a call, a permit rule never "
        "denies one). Nothing was decided and no rule was saved; choose the rule again "
        "(allow similar and approve, or forbid similar and deny) and check its text")


def rule_json(rule: PolicyRule) -> dict[str, object]:
    return {"id": rule.id, "author": rule.author, "reason": rule.reason,
            "created": rule.created, "expires": rule.expires, "uses": rule.uses,
            "revoked": rule.revoked, "cedar": rule.cedar, "live": rule.live()}
