"""``toolkeeper serve`` offers its built-ins in the resolved locale: a real server process, and
the official MCP client listing its tools."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

from toolkeeper.config import all_tools_with_runtime, load_config
from toolkeeper.i18n import PACKAGE_DIR
from toolkeeper.i18n.localize import description_key

from ..server.test_serve import TOKEN, _client, _started

LOCALE_VARIABLES = ("TOOLKEEPER_LOCALE", "LANG", "LC_ALL", "LANGUAGE")


def _shipped(locale: str) -> dict[str, Any]:
    return tomllib.loads((PACKAGE_DIR / f"{locale}.toml").read_text(encoding="utf-8"))


async def _served(tmp_path: Path, *args: str, env: dict[str, str]) -> dict[str, Any]:
    """The tools a ``toolkeeper serve`` process lists, by name (its built-ins included)."""
    environ = {k: v for k, v in os.environ.items() if k not in LOCALE_VARIABLES}
    environ |= {"TOOLKEEPER_TOKEN": TOKEN, **env}
    state = tmp_path / "state"
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkeeper.cli", "serve", "--port", "0", "--state-dir",
         str(state), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=environ, cwd=tmp_path)
    try:
        url = _started(proc, state)
        async with _client(url) as client:
            return {t.name: t for t in (await client.list_tools()).tools}
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)


def _config(tmp_path: Path, locale: str | None) -> Path:
    (tmp_path / "ws").mkdir(exist_ok=True)
    config = tmp_path / "toolkeeper.toml"
    head = f'locale = "{locale}"\n' if locale else ""
    config.write_text(head + '[security]\nworkspace = "ws"\nallow_unconfined = true\n')
    return config


def _shell_key(config: Path) -> str:
    """``shell`` or ``shell.unconfined``: which one this host's shell is."""
    shell = next(t for t in all_tools_with_runtime(load_config(config)) if t.name == "shell")
    return description_key(shell) or "shell"


async def test_the_configs_locale_wins_over_the_environment(tmp_path: Path) -> None:
    config = _config(tmp_path, "de")
    tools = await _served(tmp_path, "--config", str(config),
                          env={"TOOLKEEPER_LOCALE": "fr_FR.UTF-8", "LANG": "ja_JP.UTF-8"})
    de = _shipped("de")
    shell, file_read = tools["shell"], tools["file_read"]
    assert shell.description == de["tools"][_shell_key(config)]
    assert shell.input_schema["properties"]["command"]["description"] == \
        de["parameters"]["shell"]["command"]
    assert file_read.description == de["tools"]["file_read"]
    assert file_read.input_schema["properties"]["offset"]["description"] == \
        de["parameters"]["file_read"]["offset"]
    assert file_read.input_schema["required"] == ["path"]  # only the words change


async def test_a_workspace_file_overrides_the_shipped_translation(tmp_path: Path) -> None:
    config = _config(tmp_path, "de")
    (tmp_path / "ws" / "tool_descriptions").mkdir()
    (tmp_path / "ws" / "tool_descriptions" / "de.toml").write_text(
        '[tools]\nfile_read = "Liest eine Datei (nur unter docs/ lesen)."\n', encoding="utf-8")
    tools = await _served(tmp_path, "--config", str(config), env={})
    de = _shipped("de")
    assert tools["file_read"].description == "Liest eine Datei (nur unter docs/ lesen)."
    assert tools["file_read"].input_schema["properties"]["path"]["description"] == \
        de["parameters"]["file_read"]["path"]  # the shipped file for the keys not overridden
    assert tools["file_write"].description == de["tools"]["file_write"]


async def test_without_a_configured_locale_the_environment_decides(tmp_path: Path) -> None:
    config = _config(tmp_path, None)
    tools = await _served(tmp_path, "--config", str(config),
                          env={"LANG": "C.UTF-8", "LC_ALL": "pt_BR.UTF-8"})
    assert tools["glob_search"].description == _shipped("pt-BR")["tools"]["glob_search"]
    (tmp_path / "state").rename(tmp_path / "first-state")
    bare = await _served(tmp_path, "--workspace", str(tmp_path / "ws"),
                         env={"TOOLKEEPER_LOCALE": "ko", "LANG": "ja_JP.UTF-8"})
    assert bare["content_search"].description == _shipped("ko")["tools"]["content_search"]
    english = _shipped("en")["parameters"]["content_search"]["ignore_case"]
    assert bare["content_search"].input_schema["properties"]["ignore_case"]["description"] \
        != english
