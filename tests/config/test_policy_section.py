"""``[policy]``: where the Cedar files are, and that no built-in tool reaches them: every
``*.cedar`` file, at any depth, whether it exists yet or not — without hiding a project's own
folders that happen to share the policy folder's name."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper import ConfigError
from toolkeeper.config import load_config, policy_from


def _config(tmp_path: Path, text: str) -> Path:
    (tmp_path / "ws").mkdir(exist_ok=True)
    path = tmp_path / "toolkeeper.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("text", "folder"), [
    ('[security]\nworkspace = "."\n', "policies"),
    ('[security]\nworkspace = "."\n[policy]\ndir = "ops/rules"\n', "ops/rules"),
    ('[security]\nworkspace = "ws"\n', "policies"),
])
def test_every_cedar_file_is_a_forbidden_path_wherever_the_policy_folder_is(
        tmp_path: Path, text: str, folder: str) -> None:
    config = load_config(_config(tmp_path, text))
    assert config.policy_dir() == tmp_path / folder
    policy = policy_from(config)
    for path in (f"{folder}/team.cedar", f"{folder}/new.cedar", "deep/a/b.cedar", "x.cedar"):
        assert policy.forbidden_rule(path) == "*.cedar", path
    assert policy.forbidden_rule("app/policies/models.py") is None


def test_an_unknown_policy_key_names_its_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"toolkeeper\.toml:2: policy\.default"):
        load_config(_config(tmp_path, "[policy]\ndefault = false\n"))
