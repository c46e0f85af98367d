"""The shipped description files against the code: English says word for word what each built-in
tool says of itself, every shipped locale has exactly English's keys (same placeholders, same
``backticked`` names), and a key one locale lacks falls back to English for that key alone.

The tools and their parameters are taken from the code (the config's table of built-ins and the
factories it makes them with, the shell in both its forms, ``tool_search``, ``read_skill`` and
``tool_chain``), never from a list kept here.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from toolkeeper import Tool
from toolkeeper.builtins.shell import shell_tool
from toolkeeper.codemode import ToolChainTool
from toolkeeper.config import load_config, policy_from
from toolkeeper.config.builtins_table import BUILTINS
from toolkeeper.config.gating import _family
from toolkeeper.i18n import PACKAGE_DIR
from toolkeeper.i18n.localize import description_key, fill
from toolkeeper.invoke.invoker import ToolInvoker
from toolkeeper.sandbox import UnconfinedSandbox
from toolkeeper.toolbox import Toolbox

from ..workspaces import hand_over, reachable  # noqa: F401  (a fixture)

LOCALES = ("de", "fr", "es", "ja", "ko", "pt-BR", "zh-CN")
"""The locales shipped beside English."""

DYNAMIC = {"tool_chain"}
"""Tools whose description is made from other tools (only their parameters are translated)."""

BACKTICKED = re.compile(r"``[^`]+``|`[^`]+`")


class _Confined:
    """A sandbox as the shell sees it when one can run (only its description is read here)."""

    confined = True


def builtin_tools(workspace: Path, tmp_path: Path) -> list[Tool]:
    """Every tool toolkeeper ships, each made by the code that makes it."""
    skill = tmp_path / "skills" / "triage"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: triage\ndescription: Sort the inbox.\n---\n"
                                    "Label every message.\n")
    (tmp_path / "toolkeeper.toml").write_text(
        f'[security]\nworkspace = "{workspace}"\n'
        f'[skills]\ndir = "{tmp_path / "skills"}"\nprompt_injection_mode = "compact"\n')
    config = load_config(tmp_path / "toolkeeper.toml")
    policy = policy_from(config)
    made: dict[str, Tool] = {}
    for family in dict.fromkeys(b.family for b in BUILTINS):
        made.update((t.name, t) for t in _family(family, policy, config))
    for builtin in BUILTINS:  # offered under another name than the family's (web_fetch)
        if builtin.made_as is not None:
            made[builtin.name] = made[builtin.made_as].replace(name=builtin.name)
    assert {b.name for b in BUILTINS} <= set(made)
    hand_over(workspace)
    shells = [shell_tool(policy, sandbox=_Confined()),  # type: ignore[arg-type]
              shell_tool(policy, sandbox=UnconfinedSandbox())]
    assert description_key(shells[0]) is None and description_key(shells[1]) is not None
    chain = ToolChainTool(ToolInvoker(Toolbox([])))
    search = Toolbox().with_tool_search().get("tool_search")
    assert isinstance(search, Tool)
    return [*shells, *(t for name, t in made.items() if name != "shell"), search, chain]


@pytest.fixture
def tools(reachable: Path, tmp_path: Path) -> list[Tool]:  # noqa: F811
    return builtin_tools(reachable, tmp_path)


def _load(locale: str) -> dict[str, Any]:
    return tomllib.loads((PACKAGE_DIR / f"{locale}.toml").read_text(encoding="utf-8"))


def _keys(table: dict[str, Any]) -> set[str]:
    return {f"tools.{k}" for k in table.get("tools", {})} | {
        f"parameters.{tool}.{p}" for tool, params in table.get("parameters", {}).items()
        for p in params}


def _text(table: dict[str, Any], key: str) -> str:
    section, _, rest = key.partition(".")
    if section == "tools":
        return str(table["tools"][rest])
    tool, _, param = rest.partition(".")
    return str(table["parameters"][tool][param])


def _args(tool: Tool) -> dict[str, Any]:
    hints = tool.metadata.extra.get("i18n", {})
    return dict(hints.get("args", {}))


def test_english_says_what_each_built_in_says_of_itself(tools: list[Tool]) -> None:
    english = _load("en")
    expected: set[str] = set()
    for tool in tools:
        if tool.name not in DYNAMIC:
            key = description_key(tool) or tool.name
            expected.add(f"tools.{key}")
            assert key in english["tools"], f"en.toml has no [tools] {key!r}"
            assert fill(english["tools"][key], _args(tool)) == tool.description, (
                f"en.toml's {key!r} differs from the tool's own description: update en.toml "
                "(and every locale) to the tool's words")
        for name, schema in (tool.parameters.get("properties") or {}).items():
            expected.add(f"parameters.{tool.name}.{name}")
            text = english["parameters"].get(tool.name, {}).get(name)
            assert text == schema.get("description"), (
                f"en.toml's [parameters.{tool.name}] {name!r} differs from the tool's own")
    assert _keys(english) == expected  # nothing stray: every key is a tool or parameter
