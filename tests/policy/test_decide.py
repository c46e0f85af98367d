"""Deciding is governed too: the ``decide`` action with the operator as principal, the
request's tool as resource and the request as context — by default every operator decides
everything; a team's forbid keeps a tool's requests for the people it names. And a stored rule
marked ``@once`` decides one call, then it is spent on every process sharing the store."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from toolkeeper import Toolbox, tool
from toolkeeper.core.context import Caller
from toolkeeper.errors import ConfigError
from toolkeeper.invoke import ChainPolicy
from toolkeeper.policy import Policies, PolicyRule, PolicyStore


@tool(risk="high")
def payments_send(vendor: str, amount: int) -> str:
    """Pay a vendor."""
    return f"paid {vendor}"


@tool(risk="high")
def deploy(env: str, amount: str = "") -> str:
    """Deploy."""
    return env


BOX = Toolbox([payments_send, deploy])
FINANCE = '''
@id("payments-by-finance") @reason("payments are approved by finance")
forbid (principal, action == Action::"decide", resource)
when { resource.name like "payments_*" } unless { principal == Operator::"finance" };

@id("big-by-cfo")
forbid (principal, action == Action::"decide", resource)
when { context.args has env && context.args.env == "prod" && context.client == "ci" }
unless { principal == Operator::"cfo" };
'''


def _may(policies: Policies, who: str, tool_name: str, client: str = "default",
         **arguments: object) -> tuple[str, list[str]]:
    found = BOX.get(tool_name)
    answer = policies.may_decide(who, tool=tool_name, found=found, risk="high", client=client,
                                 reason="", arguments=arguments)
    return answer.outcome, [p.id for p in answer.policies]


def test_every_operator_decides_everything_by_default() -> None:
    assert _may(Policies(BOX), "alice", "payments_send", vendor="a", amount=1) == (
        "allow", ["default.decide"])


def test_a_forbid_on_decide_keeps_a_tools_requests_for_the_people_it_names() -> None:
    team = Policies(BOX, text={"team.cedar": FINANCE})
    assert _may(team, "alice", "payments_send", vendor="a", amount=1) == (
        "deny", ["payments-by-finance"])
    assert _may(team, "finance", "payments_send", vendor="a", amount=1)[0] == "allow"
    assert _may(team, "alice", "deploy", env="qa")[0] == "allow"
    # the request's arguments and client are the context
    assert _may(team, "alice", "deploy", client="ci", env="prod") == ("deny", ["big-by-cfo"])
    assert _may(team, "cfo", "deploy", client="ci", env="prod")[0] == "allow"
    assert _may(team, "alice", "deploy", client="web", env="prod")[0] == "allow"
    # a request whose tool has left the catalog is judged by its name and risk
    assert _may(team, "alice", "payments_gone")[0] == "deny"


def test_a_decide_policy_naming_what_the_schema_lacks_is_refused() -> None:
    with pytest.raises(ConfigError):
        Policies(BOX, text={"bad.cedar": 'forbid (principal == Client::"x", action == '
                            'Action::"decide", resource);'}).load()


def test_a_rule_for_one_call_decides_once_on_every_process(tmp_path: Path) -> None:
    store = PolicyStore(tmp_path / "state.db")
    one, two = Policies(BOX, store=store), Policies(BOX, store=PolicyStore(tmp_path / "state.db"))
    store.add(PolicyRule(id="rule_once", author="operator:ann", reason="", created=time.time(),
                         cedar='@once\npermit (principal, action == Action::"deploy", '
                         'resource == Tool::"deploy") when { context.args.env == "qa" };'))
    caller, limits = Caller(client="ci"), ChainPolicy()
    first = one.decide(deploy, caller, {"env": "qa"}, limits=limits, chain=False)
    second = two.decide(deploy, caller, {"env": "qa"}, limits=limits, chain=False)
    assert [p.id for p in first.claims] == [p.id for p in second.claims] == ["rule_once"]
    settled = [one.settle(first, deploy, caller, {"env": "qa"}, limits=limits, chain=False),
               two.settle(second, deploy, caller, {"env": "qa"}, limits=limits, chain=False)]
    assert sorted(d.outcome for d in settled) == ["allow", "ask"]  # one call, whoever is first
    spent = store.get("rule_once")
    assert spent is not None and spent.revoked is not None and spent.uses == 1
    assert one.decide(deploy, caller, {"env": "qa"}, limits=limits, chain=False).outcome == "ask"


def test_once_marks_only_a_stored_rule() -> None:
    with pytest.raises(ConfigError, match="@once marks a stored rule"):
        Policies(BOX, text={"a.cedar": '@once permit (principal, action, resource);'}).load()
