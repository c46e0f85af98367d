"""``toolkeeper policy show|list|test|explain|add|revoke``: the policies ``toolkeeper serve``
decides with, read and changed by the operator from a terminal (the state dir or the store is
the operator's: no client credential reaches these).

The catalog is built as ``serve`` builds it (the same TARGETS, ``--config`` and
``--no-builtins``), so a policy is checked against the tools it will meet.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from ..core.context import Caller
from ..core.spec import ToolLike
from ..errors import ToolkeeperError
from ..extras import MissingExtraError
from ..invoke.invoker import ToolInvoker
from ..policy import PolicyDecision, PolicyRule, PolicyStore
from ..policy.schema import GET_PROMPT, READ_RESOURCE
from ..policy.source import parse_text
from .report import StateDir, Store, fail, out, state_dir_of, store_target
from .serve_door import build_door
from .serve_settings import serve_settings

__all__ = ["policy_app"]

policy_app = typer.Typer(help="Show, test and change the policies serve decides with.",
                         no_args_is_help=True)
Targets = Annotated[list[str] | None, typer.Argument(
    help="The tools serve is given ('pkg.mod', 'file.py'), to check policies against.")]
ConfigOpt = Annotated[Path | None, typer.Option("--config", help="toolkeeper.toml, as serve's.")]
NoBuiltins = Annotated[bool, typer.Option("--no-builtins", help="As serve's --no-builtins.")]
CallJson = Annotated[str, typer.Argument(
    help='The call: {"tool": NAME, "arguments": {...}, "client": NAME, "channel": "mcp", '
         '"code_mode": false}; or a read: {"resource": URI} or {"prompt": NAME}, with '
         '"server" for the gateway\'s.')]
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
DENIED_EXIT, ASK_EXIT = 3, 1
"""``policy test`` exits 0 for allow, ``ASK_EXIT`` for ask and ``DENIED_EXIT`` for deny."""


def _door(targets: list[str] | None, config: Path | None, no_builtins: bool,
          state_dir: Path | None, store: str | None) -> ToolInvoker:
    """The invoker serve would build (its catalog, its policies over this store)."""
    try:
        settings = serve_settings({"targets": tuple(targets or ()), "config": config,
                                   "no_builtins": no_builtins, "store": store,
                                   "state_dir": state_dir_of(state_dir)})
        store_target(settings.store, settings.state_dir)  # SQLite: its directory made
        invoker = build_door(settings)
        assert invoker.policies is not None
        invoker.policies.load()
    except (ToolkeeperError, MissingExtraError) as exc:
        raise fail(exc) from exc
    return invoker


@policy_app.command("show")
def show(targets: Targets = None, config: ConfigOpt = None, no_builtins: NoBuiltins = False,
         state_dir: StateDir = None, store: Store = None) -> None:
    """Print the effective set as Cedar: the default set compiled from \\[security], the files,
    the stored rules in force."""
    invoker = _door(targets, config, no_builtins, state_dir, store)
    assert invoker.policies is not None
    print(invoker.policies.text(invoker.policy), end="")


@policy_app.command("list")
def list_rules(targets: Targets = None, config: ConfigOpt = None,
               no_builtins: NoBuiltins = False, state_dir: StateDir = None,
               store: Store = None,
               everything: Annotated[bool, typer.Option(
                   "--all", help="Revoked and expired rules too.")] = False,
               as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """The written policies (id, where) and the stored rules (who, when, until, uses)."""
    invoker = _door(targets, config, no_builtins, state_dir, store)
    policies = invoker.policies
    assert policies is not None and policies.store is not None
    rules = policies.store.rules(everything=everything)
    written = [w.matched for w in policies.written()]
    if as_json:
        print(json.dumps({"files": [{"id": m.id, "effect": m.effect, "ask": m.ask,
                                     "reason": m.reason, "where": m.where} for m in written],
                          "rules": [_rule_json(r) for r in rules]}, indent=1))
        return
    for m in written:
        kind = "ask" if m.ask else m.effect
        out.print(f"{m.id}  {kind}  {m.where}  {m.reason}",
                  markup=False, highlight=False)
    for rule in rules:
        out.print(f"{rule.id}  by {rule.author}  {_when(rule.created)}  until "
                  f"{_when(rule.expires) if rule.expires else 'revoked'}  uses {rule.uses}"
                  f"{'  REVOKED' if rule.revoked else ''}  {rule.reason}",
                  markup=False, highlight=False)
    out.print(f"{len(written)} written polic{'y' if len(written) == 1 else 'ies'}, "
              f"{len(rules)} stored rule(s)", markup=False, highlight=False)


def _rule_json(rule: PolicyRule) -> dict[str, object]:
    return {"id": rule.id, "author": rule.author, "reason": rule.reason,
            "created": rule.created, "expires": rule.expires, "uses": rule.uses,
            "revoked": rule.revoked, "cedar": rule.cedar}


def _when(stamp: float | None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp)) if stamp else "-"


def _decide(invoker: ToolInvoker, call_json: str) -> tuple[str, PolicyDecision]:
    """What the policies say of the call, resource read or prompt get ``call_json`` names:
    (the tool's, resource's or prompt's name, the decision)."""
    call = _call(call_json)
    caller = Caller(client=str(call.get("client", "")),
                    channel=str(call.get("channel", "mcp")),  # type: ignore[arg-type]
                    subject=str(call.get("subject", "")),
                    scopes=tuple(sorted(str(s) for s in call.get("scopes", []))))
    wire = {"protocol": str(call.get("protocol", "")), "era": str(call.get("era", ""))}
    assert invoker.policies is not None
    offer = _offer(call)
    try:
        if offer is not None:
            return offer[1], invoker.policies.decide_offer(
                *offer, caller, server=str(call.get("server", "")), **wire)
        tool = _tool(invoker, call)
        return tool.qualified_name, invoker.policies.decide(
            tool, caller, call.get("arguments", {}), limits=invoker.policy,
            chain=bool(call.get("code_mode")), **wire)
    except (ToolkeeperError, MissingExtraError) as exc:
        raise fail(exc) from exc


def _call(call_json: str) -> dict[str, Any]:
    try:
        call = json.loads(call_json)
    except json.JSONDecodeError as exc:
        raise fail(f"CALL_JSON is not JSON ({exc}); give e.g. "
                   '\'{"tool": "shell", "arguments": {"command": "ls"}}\'') from None
    if not isinstance(call, dict):
        raise fail('CALL_JSON is not an object; give e.g. \'{"tool": "shell", "arguments": '
                   '{"command": "ls"}}\' or \'{"resource": "notes://a"}\'')
    return call


def _offer(call: dict[str, Any]) -> tuple[str, str] | None:
    """``(read_resource, URI)`` or ``(get_prompt, NAME)`` when the call names one."""
    for key, action in (("resource", READ_RESOURCE), ("prompt", GET_PROMPT)):
        if isinstance(call.get(key), str):
            return action, str(call[key])
    return None


def _tool(invoker: ToolInvoker, call: dict[str, Any]) -> ToolLike:
    name = call.get("tool", call.get("name"))
    tool = invoker.registry.get(str(name)) if name else None
    if tool is None:
        known = ", ".join(sorted(invoker.registry.names())[:20])
        raise fail(f"CALL_JSON names no tool of the catalog ({name!r}), nor a \"resource\" or "
                   f"a \"prompt\"; known tools: {known}")
    return tool


@policy_app.command("test")
def try_call(call_json: CallJson, targets: Targets = None, config: ConfigOpt = None,
         no_builtins: NoBuiltins = False, state_dir: StateDir = None,
         store: Store = None) -> None:
    """Decide a call without running it: prints allow, ask or deny and the deciding policies
    (exit 0 allow, 1 ask, 3 deny)."""
    _, decision = _decide(_door(targets, config, no_builtins, state_dir, store), call_json)
    out.print(decision.summary(), markup=False, highlight=False)
    raise typer.Exit({"allow": 0, "ask": ASK_EXIT, "deny": DENIED_EXIT}[decision.outcome])


@policy_app.command("explain")
def explain(call_json: CallJson, targets: Targets = None, config: ConfigOpt = None,
            no_builtins: NoBuiltins = False, state_dir: StateDir = None,
            store: Store = None) -> None:
    """Which policies decided a call and why, and every policy that was considered."""
    invoker = _door(targets, config, no_builtins, state_dir, store)
    name, decision = _decide(invoker, call_json)
    assert invoker.policies is not None
    out.print(f"{name}: {decision.outcome.upper()}", markup=False, highlight=False)
    for policy in decision.policies:
        out.print(f"  decided by {policy.describe()} [{policy.where}]",
                  markup=False, highlight=False)
    for error in decision.errors:
        out.print(f"  failed to evaluate: {error}", markup=False, highlight=False)
    offer = _offer(_call(call_json))
    if decision.outcome == "deny" and not decision.policies:
        what = ("reading resource" if offer[0] == READ_RESOURCE else "getting prompt") \
            if offer else ""
        told = decision.refusal(offer[0], f"{what} {name!r}") if offer else decision.message(name)
        out.print(f"  {told}", markup=False, highlight=False)
    tool = invoker.registry.get(name) if offer is None else None
    if tool is None:
        return
    considered = invoker.policies.candidates(tool)
    out.print(f"  considered {len(considered)} written or stored polic"
              f"{'y' if len(considered) == 1 else 'ies'} whose scope can name {name}"
              + (":" if considered else ""), markup=False, highlight=False)
    for policy in considered:
        mark = "ask" if policy.ask else policy.effect
        out.print(f"    {policy.id} ({mark}) [{policy.where}]", markup=False, highlight=False)


@policy_app.command("add")
def add(cedar: Annotated[str, typer.Argument(help="One Cedar policy.")],
        targets: Targets = None, config: ConfigOpt = None, no_builtins: NoBuiltins = False,
        state_dir: StateDir = None, store: Store = None,
        reason: Annotated[str, typer.Option(help="Why (shown when it decides).")] = "",
        author: Annotated[str, typer.Option(help="Who makes it.")] = "operator",
        expires: Annotated[str | None, typer.Option(
            help="How long it decides: 90s, 30m, 8h, 1d; default until revoked.")] = None,
        ) -> None:
    """Store a rule (checked against the catalog first); every server on this store applies it
    within a second."""
    invoker = _door(targets, config, no_builtins, state_dir, store)
    policies = invoker.policies
    assert policies is not None and policies.store is not None
    rule = PolicyRule(id=PolicyRule.new_id(), cedar=cedar.strip(), author=author,
                      reason=reason, created=time.time(),
                      expires=time.time() + _seconds(expires) if expires else None)
    try:
        parse_text(rule.cedar, rule.id, stored=True)
        policies.check_with(rule)
    except (ToolkeeperError, MissingExtraError) as exc:
        raise fail(exc) from exc
    policies.store.add(rule)
    out.print(f"{rule.id} stored", markup=False, highlight=False)


def _seconds(text: str) -> float:
    match = _DURATION.match(text.strip())
    if match is None:
        raise fail(f"--expires {text!r}: give a number and a unit, as 90s, 30m, 8h or 1d")
    return float(match.group(1)) * _SECONDS[match.group(2)]


@policy_app.command("revoke")
def revoke(rule_id: Annotated[str, typer.Argument(help="The stored rule's id (rule_…).")],
           state_dir: StateDir = None, store: Store = None) -> None:
    """End a stored rule now (it stays listed with --all)."""
    try:
        rules = PolicyStore(store_target(store, state_dir_of(state_dir), create=False))
        done = rules.revoke(rule_id)
    except ToolkeeperError as exc:
        raise fail(exc) from exc
    if not done:
        raise fail(f"no stored rule {rule_id!r} in force; toolkeeper policy list --all shows "
                   "them")
    out.print(f"{rule_id} revoked", markup=False, highlight=False)

