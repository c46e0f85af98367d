"""The mistakes a new user of the config meets first: a workspace that does not exist
(told in one line naming the file, the key and the line — never a traceback from deep inside a
tool) and ``chain_policy`` from the top package. A missing skills folder:
test_runtime_sections.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper import (
    ConfigError,
    SecurityPolicy,
    all_tools_with_runtime,
    chain_policy,
    default_tools,
    load_config,
)


def test_a_missing_workspace_names_the_file_the_key_and_the_line(tmp_path: Path) -> None:
    path = tmp_path / "toolkeeper.toml"
    path.write_text('locale = "en"\n\n[security]\nworkspace = "no-such-dir"\n')
    with pytest.raises(ConfigError) as error:
        all_tools_with_runtime(load_config(path))
    message = str(error.value)
    assert message.startswith(f"{path.resolve()}:4: security.workspace: ")
    assert "no-such-dir' does not exist; create it" in message and "\n" not in message


def test_a_workspace_that_is_a_file_is_refused_too(tmp_path: Path) -> None:
    (tmp_path / "ws").write_text("not a directory")
    with pytest.raises(ConfigError, match="is not a directory"):
        default_tools(SecurityPolicy(workspace=tmp_path / "ws"))


def test_default_tools_of_a_missing_workspace_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^SecurityPolicy: security\.workspace: .*missing"):
        default_tools(SecurityPolicy(workspace=tmp_path / "missing", autonomy="supervised"))


def test_chain_policy_comes_from_the_top_package(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    path = tmp_path / "toolkeeper.toml"
    path.write_text('[security]\nworkspace = "ws"\nautonomy = "full"\n')
    policy = chain_policy(load_config(path))
    assert {"file_write", "file_edit"} <= policy.unapproved_tools


@pytest.mark.parametrize(("server", "said"), [
    ('command = "x"\n[mcp.servers.oauth]\n', "oauth is for a 'url' server only"),
    ('url = "https://u.example/mcp"\n[mcp.servers.oauth]\ngrant = "client_credentials"\n',
     "oauth grant 'client_credentials' needs client_id and client_secret"),
    ('url = "https://u.example/mcp"\n[mcp.servers.oauth]\nclient_metadata_url = '
     '"http://u.example/client.json"\n', "client_metadata_url"),
])
def test_an_upstream_s_oauth_that_cannot_work_is_refused_at_load(
        tmp_path: Path, server: str, said: str) -> None:
    config = tmp_path / "toolkeeper.toml"
    config.write_text(f'[mcp]\nenabled = true\n[[mcp.servers]]\nname = "up"\n{server}')
    with pytest.raises(ConfigError, match=said):
        load_config(config)
