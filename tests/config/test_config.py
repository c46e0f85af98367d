"""Config gating: which tools exist, why, and which key in which file decided it."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper import ConfigError
from toolkeeper.builtins import shell
from toolkeeper.config import Builtin, all_tools_with_runtime, explain, load_config
from toolkeeper.config.gating import Decision, decide
from toolkeeper.sandbox import SandboxReport, detect


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "toolkeeper.toml"
    path.write_text(text)
    (tmp_path / "ws").mkdir(exist_ok=True)
    return path


def by_tool(config_path: Path) -> dict[str, Decision]:
    return {d.tool: d for d in explain(load_config(config_path))}


def test_defaults_give_the_core_and_explain_the_rest(tmp_path: Path) -> None:
    decisions = by_tool(write(tmp_path, '[security]\nworkspace = "ws"\n'))
    assert decisions["file_read"].included and decisions["calculator"].included
    fetch = decisions["web_fetch"]
    assert not fetch.included and fetch.reason == "web_fetch.enabled is not set to enable it"


def test_an_enabled_flag_adds_the_tool_and_cites_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, '[security]\nworkspace = "ws"\n\n[web_fetch]\nenabled = true\n')
    decision = by_tool(path)["web_fetch"]
    assert decision.included and decision.source == f"{path.resolve()}:5"
    names = [t.name for t in all_tools_with_runtime(load_config(path))]
    assert "web_fetch" in names and "http_request" not in names


def test_a_variant_setting_selects_read_skill(tmp_path: Path) -> None:
    skills = tmp_path / "skills" / "x"
    skills.mkdir(parents=True)
    (skills / "SKILL.md").write_text("---\nname: x\ndescription: d\n---\nbody\n")
    path = write(tmp_path, '[security]\nworkspace = "ws"\n[skills]\ndir = "'
                 f'{tmp_path / "skills"}"\nprompt_injection_mode = "compact"\n')
    names = [t.name for t in all_tools_with_runtime(load_config(path))]
    assert "read_skill" in names


def test_credentials_are_part_of_the_gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = load_config(write(tmp_path, '[security]\nworkspace = "ws"\n[http_request]\n'
                                         'enabled = true\n'))
    notion = Builtin(name="notion", family="http", key="http_request.enabled",
                     enabled=lambda c: c.http_request.enabled,
                     credentials=[("http_request.api_key", "NOTION_API_KEY")])
    monkeypatch.delenv("NOTION_API_KEY", raising=False)
    missing = decide(config, notion, blocker=None)
    assert (missing.included, missing.cause) == (False, "missing_credentials")
    assert "needs http_request.api_key in the config or the NOTION_API_KEY" in missing.reason
    monkeypatch.setenv("NOTION_API_KEY", "k")
    assert decide(config, notion, blocker=None).cause == "enabled"


def test_shell_is_left_out_with_the_reason_when_no_sandbox_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = SandboxReport(backend="bwrap", available=False, detail="bwrap is not installed")
    monkeypatch.setattr(detect, "probe", lambda: missing)
    monkeypatch.setattr(shell, "probe", lambda: missing)
    path = write(tmp_path, '[security]\nworkspace = "ws"\n')
    decision = by_tool(path)["shell"]
    assert not decision.included and "bwrap is not installed" in decision.reason
    assert "shell" not in [t.name for t in all_tools_with_runtime(load_config(path))]
    unconfined = write(tmp_path, '[security]\nworkspace = "ws"\nallow_unconfined = true\n')
    tools = {t.name: t for t in all_tools_with_runtime(load_config(unconfined))}
    assert tools["shell"].hitl_mode.value == "blocking"
    assert "UNCONFINED" in tools["shell"].description


@pytest.mark.parametrize(("text", "message"), [
    ("[security\n", "toolkeeper.toml"),
    ('[security]\nautonomy = "yolo"\n', "toolkeeper.toml:2: security.autonomy"),
    ("[web_fetch]\nenabeld = true\n", "toolkeeper.toml:2: web_fetch.enabeld"),
])
def test_bad_config_names_file_key_and_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, text))


def test_a_missing_explicit_config_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such configuration file"):
        load_config(tmp_path / "nope.toml")


def test_read_only_autonomy_leaves_out_every_tool_that_writes(tmp_path: Path) -> None:
    path = write(tmp_path, '[security]\nworkspace = "ws"\nautonomy = "read_only"\n'
                           '[http_request]\nenabled = true\n')
    decisions = by_tool(path)
    for name in ("shell", "file_write", "file_edit", "http_request"):
        assert (decisions[name].included, decisions[name].cause) == (False, "read_only"), name
        assert decisions[name].key == "security.autonomy"
    names = {t.name for t in all_tools_with_runtime(load_config(path))}
    assert {"file_read", "glob_search", "content_search", "calculator"} <= names
    assert not names & {"shell", "file_write", "file_edit", "http_request"}


async def test_full_autonomy_runs_built_ins_without_approval_and_supervised_waits(
        tmp_path: Path) -> None:
    from toolkeeper import ToolCall, ToolInvoker
    from toolkeeper.config import chain_policy

    results = {}
    for autonomy in ("supervised", "full"):
        (tmp_path / autonomy).mkdir()
        path = write(tmp_path / autonomy, f'[security]\nworkspace = "."\nautonomy = "{autonomy}"\n')
        config = load_config(path)
        invoker = ToolInvoker(all_tools_with_runtime(config), policy=chain_policy(config))
        call = ToolCall(id="c1", name="file_write", arguments={"path": "a.txt", "content": "x"})
        results[autonomy] = await invoker.invoke(call, session=invoker.open_session())
    assert (results["supervised"].status, results["supervised"].error_code) == ("denied", "denied")
    assert results["full"].status == "ok" and (tmp_path / "full" / "a.txt").read_text() == "x"
    assert not (tmp_path / "supervised" / "a.txt").exists()
