"""``toolkeeper policy``: the effective set printed as Cedar, a call decided without running
(allow, ask or deny, and why), rules added and revoked from the operator's terminal, and a
mistake said in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolkeeper.cli.main import app

runner = CliRunner()
TOOLS = '''
from toolkeeper import ToolRisk, tool


@tool(risk=ToolRisk.HIGH)
def deploy(service: str, env: str) -> str:
    """Deploy a service."""
    return service
'''
TEAM = '''@id("no-prod") @reason("prod goes through the release train")
forbid (principal, action == Action::"deploy", resource) when { context.args.env == "prod" };
'''


@pytest.fixture
def project(tmp_path: Path) -> list[str]:
    (tmp_path / "tools.py").write_text(TOOLS)
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "team.cedar").write_text(TEAM)
    (tmp_path / "toolkeeper.toml").write_text('[security]\nautonomy = "full"\n')
    return [str(tmp_path / "tools.py"), "--config", str(tmp_path / "toolkeeper.toml"),
            "--state-dir", str(tmp_path / "state")]


def test_show_prints_the_default_set_from_security_then_the_files(project: list[str]) -> None:
    shown = runner.invoke(app, ["policy", "show", *project])
    assert shown.exit_code == 0, shown.output
    text = shown.output
    assert '@id("default.unapproved-tools")' in text and '"file_read"' in text  # autonomy = full
    assert text.index("default.ask") < text.index('@id("no-prod")')


@pytest.mark.parametrize(("call", "code", "said"), [
    ({"tool": "deploy", "arguments": {"service": "w", "env": "prod"}}, 3, "deny by no-prod"),
    ({"tool": "deploy", "arguments": {"service": "w", "env": "qa"}}, 1, "ask by default.ask"),
    ({"tool": "file_read", "arguments": {"path": "a"}}, 0, "allow by default.unapproved-tools"),
])
def test_test_decides_a_call_without_running_it(project: list[str], call: dict[str, object],
                                                code: int, said: str) -> None:
    tried = runner.invoke(app, ["policy", "test", json.dumps(call), *project])
    assert (tried.exit_code, tried.output.strip()) == (code, said)


READS = '''@id("no-secrets") @reason("secrets are for people")
forbid (principal, action == Action::"read_resource", resource) when { resource.uri like "s://*" };

@id("upstream-prompts-for-bots")
forbid (principal, action == Action::"get_prompt", resource) when { resource.server == "up" }
unless { principal.scopes.contains("bots") };
'''


@pytest.mark.parametrize(("call", "code", "said"), [
    ({"resource": "s://key"}, 3, "deny by no-secrets"),
    ({"resource": "notes://a"}, 0, "allow by default.read"),
    ({"prompt": "up-greet", "server": "up"}, 3, "deny by upstream-prompts-for-bots"),
    ({"prompt": "up-greet", "server": "up", "scopes": ["bots"]}, 0, "allow by default.read"),
])
def test_test_decides_a_read_or_a_prompt(project: list[str], tmp_path: Path,
                                         call: dict[str, object], code: int, said: str) -> None:
    (tmp_path / "policies" / "reads.cedar").write_text(READS)
    tried = runner.invoke(app, ["policy", "test", json.dumps(call), *project])
    assert (tried.exit_code, tried.output.strip()) == (code, said)


def test_explain_names_the_deciding_policy_and_what_was_considered(project: list[str]) -> None:
    told = runner.invoke(app, ["policy", "explain", json.dumps(
        {"tool": "deploy", "arguments": {"service": "w", "env": "prod"}, "client": "ci"}),
        *project])
    assert told.exit_code == 0, told.output
    assert "deploy: DENY" in told.output
    assert "decided by policy no-prod (prod goes through the release train)" in told.output
    assert "considered 1 written or stored policy" in told.output


def test_rules_are_added_listed_and_revoked_and_mistakes_are_one_line(
        project: list[str]) -> None:
    added = runner.invoke(app, ["policy", "add", 'permit (principal, action == Action::'
                                '"deploy", resource) when { context.args.env == "qa" };',
                                *project, "--reason", "qa is fine", "--expires", "1h"])
    assert added.exit_code == 0, added.output
    rule = added.output.split()[0]
    tried = runner.invoke(app, ["policy", "test", json.dumps(
        {"tool": "deploy", "arguments": {"service": "w", "env": "qa"}}), *project])
    assert tried.output.strip() == f"allow by {rule}"
    listed = json.loads(runner.invoke(app, ["policy", "list", *project, "--json"]).output)
    assert [r["id"] for r in listed["rules"]] == [rule]
    assert listed["files"][0]["id"] == "no-prod"
    state = project[-2:]
    assert runner.invoke(app, ["policy", "revoke", rule, *state]).exit_code == 0
    again = runner.invoke(app, ["policy", "revoke", rule, *state])
    assert again.exit_code == 2 and f"no stored rule '{rule}' in force" in again.output
    wrong = runner.invoke(app, ["policy", "add", 'forbid (principal, action == Action::"deplo",'
                                ' resource);', *project])
    assert wrong.exit_code == 2 and "did you mean 'deploy'?" in wrong.output
    assert "Traceback" not in wrong.output
    assert "1m30" not in runner.invoke(app, ["policy", "add", "x", *project, "--expires",
                                             "soon"]).output
