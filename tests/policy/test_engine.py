"""Policies through the door: a forbid denies before anything runs and names its id and reason,
a plain permit runs a call without asking, an @ask permit asks, nothing permitted is denied,
and a policy that names what does not exist is refused with its line and the nearest name; a
resource read or a prompt get is served or refused, never asked."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from toolkeeper import AutoApprovalHandler, Toolbox, tool
from toolkeeper.core.context import Caller
from toolkeeper.errors import ConfigError
from toolkeeper.invoke import ChainPolicy, ToolCall, ToolInvoker
from toolkeeper.policy import Policies, PolicyRule, PolicyStore

pytestmark = pytest.mark.anyio
RAN: list[str] = []


@tool(risk="high")
def shell(command: str, timeout: int = 5) -> str:
    """Run a command."""
    RAN.append(command)
    return f"ran {command}"


@tool
def lookup(key: str) -> str:
    """Read a value."""
    return key


BOX = Toolbox([shell, lookup])
TEAM = '''// the team's rules
@id("no-rm")
@reason("rm is never run here")
forbid (principal, action == Action::"shell", resource)
when { context.args.command like "*rm *" };

@id("ls-runs")
permit (principal == Client::"ci", action == Action::"shell", resource)
when { context.args.command like "ls*" };

@id("lookups-ask") @ask
permit (principal, action == Action::"lookup", resource)
when { context.args.key like "secret*" };
'''


async def _run(invoker: ToolInvoker, name: str, caller: Caller = Caller(client="ci"),
               **arguments: object) -> tuple[str, str | None, str]:
    async with invoker.open_session(caller=caller) as session:
        result = await invoker.invoke(ToolCall(id="c", name=name, arguments=arguments),
                                      session=session)
    return result.status, result.error_code, result.text


async def test_a_forbid_refuses_before_the_tool_runs_naming_its_id_and_reason() -> None:
    invoker = ToolInvoker(BOX, AutoApprovalHandler(), policies=Policies(BOX, text={"t": TEAM}))
    RAN.clear()
    status, code, text = await _run(invoker, "shell", command="rm -rf /")
    assert (status, code, RAN) == ("denied", "policy_denied", [])
    assert "policy no-rm (rm is never run here)" in text


async def test_a_plain_permit_runs_a_risky_call_without_asking_for_that_client_only() -> None:
    invoker = ToolInvoker(BOX, policies=Policies(BOX, text={"t": TEAM}))  # nobody to ask
    assert (await _run(invoker, "shell", command="ls -l"))[:2] == ("ok", None)
    other = await _run(invoker, "shell", Caller(client="bot"), command="ls -l")
    assert other[:2] == ("denied", "denied")  # the default set asks, and nobody can answer
    assert "needs approval" in other[2]
    assert (await _run(invoker, "shell", command="cat x"))[1] == "denied"


async def test_an_ask_permit_makes_a_safe_call_ask_by_argument() -> None:
    invoker = ToolInvoker(BOX, policies=Policies(BOX, text={"t": TEAM}))
    assert (await _run(invoker, "lookup", key="colour"))[:2] == ("ok", None)
    assert (await _run(invoker, "lookup", key="secret-key"))[1] == "denied"


async def test_without_the_default_set_what_no_policy_permits_is_denied() -> None:
    invoker = ToolInvoker(BOX, policies=Policies(BOX, text={"t": TEAM}, defaults=False))
    status, code, text = await _run(invoker, "lookup", key="colour")
    assert (status, code) == ("denied", "policy_denied")
    assert "no policy permits it" in text
    assert (await _run(invoker, "shell", command="ls"))[:2] == ("ok", None)


def test_a_session_policy_feeds_the_default_set_per_call() -> None:
    policies = Policies(BOX, text={"t": TEAM})
    caller = Caller(client="x")
    loose = ChainPolicy(max_risk_unapproved="high")
    assert policies.decide(shell, caller, {"command": "cat"}, limits=ChainPolicy(),
                           chain=False).outcome == "ask"
    assert policies.decide(shell, caller, {"command": "cat"}, limits=loose,
                           chain=False).outcome == "allow"
    assert policies.decide(lookup, caller, {"key": "a"}, limits=ChainPolicy(),
                           chain=True).outcome == "allow"


@pytest.mark.parametrize(("text", "message"), [
    ('permit (principal, action, resource == Tool::"shel");',
     "t:1: no tool 'shel' in the catalog; did you mean 'shell'?"),
    ('\n\npermit (principal, action == Action::"shell", resource)\n'
     'when { context.args.comand == "x" };',
     "t:3: tool 'shell' has no argument 'comand' that a policy can read; did you mean "
     "'command'?"),
    ('permit (principal, action == Action::"shel", resource);',
     "t:1: no tool or action 'shel'; did you mean 'shell'?"),
    ('permit (principal, action == Action::"shell", resource)\nwhen { context.args.timeout > 1 };',
     "t:1: argument 'timeout' is optional: test it first (context.args has timeout"),
    ('permit (principal, action, resource);\n\nforbid (principal, action, resource when {};',
     "t:3: not a Cedar policy"),
    ('@id("a") permit (principal, action, resource);\n@id("a") forbid (principal, action, '
     'resource);', "t:2: @id('a') is also the id of the policy at t:1"),
    ('@ask forbid (principal, action, resource);', "t:1: @ask marks a permit"),
    ('@ask permit (principal, action == Action::"read_resource", resource);',
     "t:1: @ask on read_resource: a person is never asked about reading a resource"),
    ('@ask permit (principal, action in [Action::"get_prompt"], resource);',
     "t:1: @ask on get_prompt: a person is never asked"),
])
def test_a_policy_naming_what_does_not_exist_is_refused_with_its_line(text: str,
                                                                      message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Policies(BOX, text={"t": text}).load()
    assert message in str(caught.value)


def test_files_are_read_from_the_directory_and_named_by_line(tmp_path: Path) -> None:
    (tmp_path / "team.cedar").write_text(TEAM)
    (tmp_path / "notes.txt").write_text("not a policy")
    policies = Policies(BOX, directory=tmp_path)
    decision = policies.decide(shell, Caller(client="ci"), {"command": "ls"},
                               limits=ChainPolicy(), chain=False)
    assert [(p.id, p.where) for p in decision.policies] == [
        ("ls-runs", f"{tmp_path / 'team.cedar'}:7")]
    (tmp_path / "team.cedar").write_text('permit (principal, action, resource == Tool::"x");')
    with pytest.raises(ConfigError, match=r"team\.cedar:1: no tool 'x'"):
        policies.refresh()
    assert policies.decide(shell, Caller(client="ci"), {"command": "ls"},  # the last good set
                           limits=ChainPolicy(), chain=False).outcome == "allow"


def test_a_stored_rule_decides_counts_its_uses_and_stops_at_its_end(tmp_path: Path) -> None:
    store = PolicyStore(tmp_path / "state.db")
    policies = Policies(BOX, store=store)
    caller = Caller(client="ci")
    ends = time.time() + 3
    store.add(PolicyRule(id="rule_a", author="ann", reason="ls is fine", created=time.time(),
                         expires=ends, cedar='permit (principal, action == Action::"shell", '
                         'resource) when { context.args.command == "ls" };'))
    decision = policies.decide(shell, caller, {"command": "ls"}, limits=ChainPolicy(),
                               chain=False)
    assert (decision.outcome, decision.policies[0].id, decision.policies[0].reason) == (
        "allow", "rule_a", "ls is fine")
    policies.flush()
    assert store.get("rule_a").uses == 1  # type: ignore[union-attr]
    deadline = time.monotonic() + 30
    while time.time() <= ends and time.monotonic() < deadline:
        time.sleep(0.05)  # the rule's own end, a condition on the clock
    assert time.time() > ends, "the clock did not pass the rule's end within 30 s"
    after = policies.decide(shell, caller, {"command": "ls"}, limits=ChainPolicy(), chain=False)
    assert (after.outcome, [p.id for p in after.policies]) == ("ask", ["default.ask"])
    assert store.rules() == []


def test_a_revoked_rule_stops_deciding_once_the_store_changes(tmp_path: Path) -> None:
    store = PolicyStore(tmp_path / "state.db")
    policies = Policies(BOX, store=store)
    store.add(PolicyRule(id="rule_b", author="ann", reason="", created=time.time(),
                         cedar='forbid (principal, action == Action::"lookup", resource);'))
    policies.load()
    caller = Caller(client="ci")
    assert policies.decide(lookup, caller, {"key": "k"}, limits=ChainPolicy(),
                           chain=False).outcome == "deny"
    assert store.revoke("rule_b") and not store.revoke("rule_b")
    assert policies.refresh()
    assert policies.decide(lookup, caller, {"key": "k"}, limits=ChainPolicy(),
                           chain=False).outcome == "allow"


def test_a_file_broken_while_watched_is_reported_once_and_the_last_good_set_decides(
        tmp_path: Path) -> None:
    (tmp_path / "team.cedar").write_text(TEAM)
    lines: list[str] = []
    policies = Policies(BOX, directory=tmp_path, report=lines.append)
    policies.load()
    policies.watch(interval=0.05)
    try:
        (tmp_path / "team.cedar").write_text(TEAM + "\npermit (principal, action, resource")
        deadline = time.monotonic() + 30
        while not lines and time.monotonic() < deadline:
            time.sleep(0.02)
        assert lines, "the broken file was not reported within 30 s"
        assert "the last good set still decides" in lines[0]
        assert "team.cedar:15: not a Cedar policy" in lines[0]
        assert policies.decide(shell, Caller(client="x"), {"command": "rm -rf /"},
                               limits=ChainPolicy(), chain=False).outcome == "deny"
    finally:
        policies.close()
    assert len(lines) == 1  # said once, not at every look


def test_a_read_is_served_or_refused_and_never_asked() -> None:
    asking = '@ask permit (principal, action, resource) when { principal == Client::"x" };\n'
    x = Caller(client="x", channel="mcp")
    with_defaults = Policies(BOX, text={"t": asking})
    alone = Policies(BOX, text={"t": asking}, defaults=False)
    assert with_defaults.decide_offer("read_resource", "a://b", x).summary() == \
        "allow by default.read"
    # an asking permit of an open scope asks about calls only: it serves no read
    assert alone.decide_offer("get_prompt", "p", x).summary() == "deny by no policy"
    assert alone.decide(lookup, x, {"key": "k"}, limits=ChainPolicy(), chain=False
                        ).outcome == "ask"


def test_a_forbid_on_a_read_names_the_upstream_and_the_scopes() -> None:
    team = Policies(BOX, text={"t": '''@id("gh") @reason("for bots")
forbid (principal, action == Action::"read_resource", resource)
when { resource.server == "github" } unless { principal.scopes.contains("bots") };'''})
    person = Caller(client="oauth:app:ann", channel="mcp", scopes=("repo",))
    bot = Caller(client="oauth:app:bot", channel="mcp", scopes=("bots", "repo"))
    refused = team.decide_offer("read_resource", "toolkeeper://mcp/github/x", person,
                                server="github")
    assert refused.summary() == "deny by gh"
    assert refused.refusal("read_resource", "reading resource 'x'") == (
        "reading resource 'x' is forbidden by policy gh (for bots); do not retry it unless "
        "the user asks")
    assert team.decide_offer("read_resource", "toolkeeper://mcp/github/x", bot,
                             server="github").outcome == "allow"
    assert team.decide_offer("read_resource", "notes://a", person).outcome == "allow"
