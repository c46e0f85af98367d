"""The rule a card proposes, and the check that a rule saved from a decision is no wider than
the request the person saw: this tool, a calling action, this client or any, and only the
arguments shown."""

from __future__ import annotations

import pytest

from toolkeeper.errors import ConfigError
from toolkeeper.policy.proposal import Proposal, expiry_of, narrow, propose

SHOWN = {"path", "lines"}


def _narrow(text: str) -> str:
    return narrow(text, tool="read_report", client="ci", shown=SHOWN)


def test_a_proposal_names_the_tool_the_client_and_the_arguments_that_matter() -> None:
    text = propose(Proposal(effect="permit", tool="read_report", client="ci",
                            args={"path": 'reports/"q*', "lines": 5}, optional={"lines"},
                            once=True, reason="fine"))
    assert text == ('@reason("fine")\n@once\npermit (principal == Client::"ci", action == '
                    'Action::"read_report", resource == Tool::"read_report")\nwhen { '
                    'context.args has lines && context.args.lines == 5 && context.args.path '
                    'like "reports/\\"q*" };')
    assert _narrow(text) == text
    anyone = propose(Proposal(effect="forbid", tool="read_report"))
    assert anyone.startswith("forbid (principal, action") and _narrow(anyone) == anyone


@pytest.mark.parametrize(("text", "said"), [
    ('permit (principal, action == Action::"read_report", resource);', "this request's tool"),
    ('permit (principal, action == Action::"read_report", resource == Tool::"other");',
     "this request's tool"),
    ('permit (principal, action, resource == Tool::"read_report");', "about calling"),
    ('permit (principal, action == Action::"decide", resource == Tool::"read_report");',
     "about calling"),
    ('permit (principal == Client::"web", action == Action::"read_report", resource == '
     'Tool::"read_report");', "this request's client"),
    ('permit (principal, action == Action::"read_report", resource == Tool::"read_report") '
     'when { context.args.path like "*" || resource.level > 0 };', "reads resource"),
    ('permit (principal, action == Action::"read_report", resource == Tool::"read_report") '
     'unless { context.args.secret == "x" };', "context.args.secret"),
    ('permit (principal, action == Action::"read_report", resource == Tool::"read_report") '
     'when { context.hour > 1 };', "context.hour"),
    ('@id("mine") @owner("x") permit (principal, action == Action::"read_report", resource == '
     'Tool::"read_report");', "@owner"),
    ('permit (principal, action == Action::"read_report", resource == Tool::"read_report");\n'
     'permit (principal, action, resource);', "exactly one policy"),
])
def test_a_rule_wider_than_the_request_is_refused_saying_what_to_change(
        text: str, said: str) -> None:
    with pytest.raises(ConfigError, match=None) as refused:
        _narrow(text)
    assert said in str(refused.value)


def test_a_call_action_and_any_client_are_within_the_request() -> None:
    text = ('permit (principal, action in Action::"call_tool", resource == Tool::"read_report") '
            'when { context.args has lines && context.args.lines < 100 };')
    assert _narrow(text) == text


def test_durations() -> None:
    assert expiry_of("once", now=0) == (None, True)
    assert expiry_of("8h", now=0) == (8 * 3600, False)
    assert expiry_of("revoked", now=0) == (None, False)
    assert expiry_of("90s", now=10) == (100, False)
    with pytest.raises(ConfigError, match="once, 1h, 8h, 24h, revoked"):
        expiry_of("a week")
