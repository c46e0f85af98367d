"""An agent runtime's config, as its documentation writes it: every section it names loads; a
section for a tool toolkeeper does not ship is explained ("not provided by toolkeeper", with its
file:line), never an error and never silently ignored; ``[autonomy]`` is read into
``[security]``."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolkeeper import ConfigError, ToolCall, ToolInvoker
from toolkeeper.cli.main import app
from toolkeeper.config import Decision, all_tools_with_runtime, explain, load_config
from toolkeeper.config.absent import NOT_PROVIDED
from toolkeeper.toolbox import Toolbox

RUNTIME_CONFIG = """\
[security]
workspace = "ws"

[browser]
enabled = true
allowed_domains = ["docs.example.com"]

[http_request]
enabled = true
allowed_domains = ["api.example.com"]

[web_fetch]
enabled = true

[web_search]
enabled = true
provider = "brave"

[text_browser]
enabled = true

[shell_tool]
timeout_secs = 60

[notion]
enabled = true
api_key = "secret_notion"

[jira]
enabled = true
base_url = "https://example.atlassian.net"
email = "me@example.com"

[linkedin]
enabled = true

[browser_delegate]
enabled = true

[cloud_ops]
enabled = true

[sop]
sops_dir = "sops"

[agents.researcher]
provider = "openrouter"
model = "anthropic/claude-sonnet-4"

[swarms.review]
agents = ["researcher"]

[autonomy]
level = "supervised"
max_actions_per_hour = 20
"""


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "ws").mkdir(exist_ok=True)
    path = tmp_path / "toolkeeper.toml"
    path.write_text(text)
    return path


def line_of(text: str, start: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if line.startswith(start))


def decisions(path: Path) -> dict[str, Decision]:
    return {d.tool: d for d in explain(load_config(path))}


def test_the_documented_snippet_registers_the_tools_it_says(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """"With those set, browser/browser_open, http_request, web_fetch, and web_search_tool are
    registered. Leave a section out (or set enabled = false) and the tool simply never
    appears." """
    snippet = RUNTIME_CONFIG.split("[text_browser]")[0]
    monkeypatch.setenv("BRAVE_API_KEY", "key")
    names = {t.name for t in all_tools_with_runtime(load_config(write(tmp_path, snippet)))}
    assert {"browser", "browser_open", "http_request", "web_fetch", "web_search_tool"} <= names
    off = snippet.replace("[web_search]\nenabled = true", "[web_search]\nenabled = false")
    left = {t.name for t in all_tools_with_runtime(load_config(write(tmp_path, off)))}
    assert names - left == {"web_search_tool"}


def test_every_section_the_runtime_config_names_loads(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, RUNTIME_CONFIG))
    assert config.browser.allowed_domains == ["docs.example.com"]
    assert config.web_search.provider == "brave" and config.text_browser.enabled
    assert set(config.agents) == {"researcher"} and set(config.swarms) == {"review"}
    assert config.security.autonomy == "supervised"


def test_a_section_for_a_tool_toolkeeper_does_not_ship_is_explained_with_its_line(
        tmp_path: Path) -> None:
    path = write(tmp_path, RUNTIME_CONFIG)
    seen = decisions(path)
    for tool, section in [("notion", "[notion]"), ("jira", "[jira]"), ("linkedin", "[linkedin]"),
                          ("browser_delegate", "[browser_delegate]"),
                          ("cloud_ops", "[cloud_ops]"), ("sop_*", "[sop]"),
                          ("delegate", "[agents.researcher]"), ("swarm", "[swarms.review]")]:
        decision = seen[tool]
        assert (decision.included, decision.cause) == (False, "not_provided"), tool
        assert decision.reason.startswith("not provided by toolkeeper: "), tool
        assert decision.source == f"{path.resolve()}:{line_of(RUNTIME_CONFIG, section)}", tool


def test_without_the_section_the_tool_is_still_listed_as_not_provided(tmp_path: Path) -> None:
    seen = decisions(write(tmp_path, '[security]\nworkspace = "ws"\n'))
    assert seen["delegate"].source == "not in the config"
    assert "does not run agents" in seen["delegate"].reason


@pytest.mark.parametrize("tool", ["cron_add", "cron_list", "cron_remove", "cron_update",
                                  "cron_run", "cron_runs", "schedule", "pushover", "canvas",
                                  "model_routing_config", "model_switch", "proxy_config",
                                  "llm_task", "swarm", "cloud_ops"])
def test_platform_tools_that_need_an_agent_runtime_are_listed_with_the_reason(
        tmp_path: Path, tool: str) -> None:
    decision = decisions(write(tmp_path, '[security]\nworkspace = "ws"\n'))[tool]
    assert not decision.included and decision.cause == "not_provided"
    assert "agent runtime" in decision.reason


def test_no_tool_is_both_shipped_and_listed_as_not_provided(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, RUNTIME_CONFIG))
    shipped = {t.name for t in all_tools_with_runtime(config)}
    assert not shipped & {a.name for a in NOT_PROVIDED}


def test_asking_for_a_tool_that_is_not_provided_logs_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write(tmp_path, '[security]\nworkspace = "ws"\n\n[notion]\nenabled = true\n')
    with caplog.at_level(logging.WARNING, logger="toolkeeper.config"):
        all_tools_with_runtime(load_config(path))
    assert any("notion not provided by toolkeeper" in r.getMessage()
               and f"{path.resolve()}:4" in r.getMessage() for r in caplog.records)


def test_tools_explain_prints_not_provided_with_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, RUNTIME_CONFIG)
    result = CliRunner().invoke(app, ["tools", "explain", "--config", str(path)],
                                env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    row = next(line for line in result.stdout.splitlines() if line.startswith("│ delegate "))
    assert "not provided" in row and "not provided by toolkeeper" in row
    assert f"toolkeeper.toml:{line_of(RUNTIME_CONFIG, '[agents.researcher]')}" in row
    autonomy = next(line for line in result.stdout.splitlines() if "max_actions_per_hour" in line)
    assert "only level, allowed_commands and forbidden_paths are read (into [security])" in autonomy


def test_a_misspelt_section_is_still_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"toolkeeper.toml:1: browsre: unknown key; "
                                          r"did you mean \[browser\]\?"):
        load_config(write(tmp_path, "[browsre]\nenabled = true\n"))


@pytest.mark.parametrize("level", ["read_only", "readonly"])
def test_autonomy_level_is_read_into_security(tmp_path: Path, level: str) -> None:
    path = write(tmp_path, f'[security]\nworkspace = "ws"\n\n[autonomy]\nlevel = "{level}"\n'
                           'allowed_commands = ["ls", "git"]\n')
    config = load_config(path)
    assert config.security.autonomy == "read_only"
    assert config.security.allowed_commands == ["ls", "git"]
    seen = decisions(path)
    assert (seen["file_write"].included, seen["file_write"].cause) == (False, "read_only")


def test_autonomy_contradicting_security_names_both_lines(tmp_path: Path) -> None:
    path = write(tmp_path, '[security]\nworkspace = "ws"\nautonomy = "full"\n\n[autonomy]\n'
                           'level = "supervised"\n')
    with pytest.raises(ConfigError, match=r"toolkeeper.toml:6: autonomy.level = 'supervised' "
                                          r"contradicts security.autonomy = 'full' "
                                          r"\(.*toolkeeper.toml:3\)"):
        load_config(path)


def test_read_skill_follows_the_compact_mode_as_documented(tmp_path: Path) -> None:
    skill = tmp_path / "skills" / "triage"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: triage\ndescription: Sort the inbox.\n---\nLabel.\n")
    compact = decisions(write(tmp_path, '[security]\nworkspace = "ws"\n[skills]\ndir = "skills"\n'
                                        'prompt_injection_mode = "compact"\n'))["read_skill"]
    assert compact.included and compact.cause == "enabled"
    full = decisions(write(tmp_path, '[security]\nworkspace = "ws"\n[skills]\ndir = "skills"\n'
                                     'prompt_injection_mode = "full"\n'))["read_skill"]
    assert (full.included, full.cause) == (False, "not_enabled")


def test_read_skill_without_its_folder_says_so_instead_of_claiming_to_be_included(
        tmp_path: Path) -> None:
    path = write(tmp_path, '[security]\nworkspace = "ws"\n[skills]\ndir = "nowhere"\n'
                           'prompt_injection_mode = "compact"\n')
    decision = decisions(path)["read_skill"]
    assert (decision.included, decision.cause) == (False, "unavailable")
    assert f"skills.dir {tmp_path.resolve() / 'nowhere'} is not a folder" in decision.reason
    assert "read_skill" not in {t.name for t in all_tools_with_runtime(load_config(path))}


async def test_web_fetch_is_also_reached_as_http_fetch(tmp_path: Path) -> None:
    path = write(tmp_path, '[security]\nworkspace = "ws"\n\n[web_fetch]\nenabled = true\n')
    box = Toolbox(all_tools_with_runtime(load_config(path)))
    assert box.get_tool("http_fetch") is box.get_tool("web_fetch")
    assert box.get_tool("web_fetch").name == "web_fetch"  # type: ignore[union-attr]
    invoker = ToolInvoker(box)
    call = ToolCall(id="c1", name="http_fetch", arguments={"url": "http://127.0.0.1:9/"})
    result = await invoker.invoke(call, session=invoker.open_session())
    assert result.error_code == "policy_violation"  # the fetch rules, under either name
    assert "not a public address" in result.text
