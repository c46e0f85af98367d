"""The shipped description files against the code: English says word for word what each built-in
tool says of itself, every shipped locale has exactly English's keys (same placeholders, same
``backticked`` names), and a key one locale lacks falls back to English for that key alone.

The tools and their parameters are taken from the code (the config's table of built-ins and the
factories it makes them with, the shell in both its forms, ``tool_search``, ``read_skill`` and
``tool_chain``), never from a list kept here.
"""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path
from typing import Any, cast

import pytest

from toolkeeper import Tool
from toolkeeper.builtins.shell import shell_tool
from toolkeeper.codemode import ToolChainTool
from toolkeeper.config import load_config, policy_from
from toolkeeper.config.builtins_table import BUILTINS
from toolkeeper.config.gating import _family
from toolkeeper.i18n import PACKAGE_DIR, DescriptionCatalog, localize_tool, localized_tools
from toolkeeper.i18n.localize import PLACEHOLDER, description_key, fill
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
    hints: Any = tool.metadata.extra.get("i18n", {})
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


@pytest.mark.parametrize("locale", LOCALES)
def test_each_locale_has_exactly_the_english_keys(locale: str) -> None:
    english, table = _load("en"), _load(locale)
    assert sorted(_keys(english) - _keys(table)) == [], f"{locale}.toml lacks these keys"
    assert sorted(_keys(table) - _keys(english)) == [], f"{locale}.toml has stray keys"
    for key in sorted(_keys(english)):
        source, text = _text(english, key), _text(table, key)
        assert isinstance(text, str) and text.strip(), f"{locale}: {key} is empty"
        assert text != source, f"{locale}: {key} is left in English"
        assert sorted(PLACEHOLDER.findall(text)) == sorted(PLACEHOLDER.findall(source)), (
            f"{locale}: {key} has other {{placeholders}} than English")
        assert sorted(BACKTICKED.findall(text)) == sorted(BACKTICKED.findall(source)), (
            f"{locale}: {key} has other backticked names than English")


@pytest.mark.parametrize("locale", LOCALES)
def test_each_locale_localizes_every_built_in(locale: str, tools: list[Tool]) -> None:
    table = _load(locale)
    catalog = DescriptionCatalog(locale)
    for tool in tools:
        shown: Any = localize_tool(tool, catalog)
        if tool.name not in DYNAMIC:
            key = description_key(tool) or tool.name
            assert shown.description == fill(table["tools"][key], _args(tool))
        else:
            assert shown.description == tool.description
        for name, schema in shown.parameters["properties"].items():
            assert schema["description"] == table["parameters"][tool.name][name]
        assert shown.parameters["required"] == tool.parameters.get("required", [])
    read_skill = next(t for t in tools if t.name == "read_skill")
    assert "triage: Sort the inbox." in localize_tool(read_skill, catalog).description


def test_a_key_missing_from_a_locale_falls_back_to_english_for_that_key_only(
        tools: list[Tool], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    shutil.copy(PACKAGE_DIR / "en.toml", shipped / "en.toml")
    german = (PACKAGE_DIR / "de.toml").read_text(encoding="utf-8")
    cut = re.sub(r"(?m)^file_read = .*\n", "", german, count=1)  # the tool's description
    cut = re.sub(r"(?m)^(\[parameters\.file_read\]\n(?:.*\n)*?)offset = .*\n", r"\1", cut,
                 count=1)  # and one of its parameters
    assert cut.count("\n") == german.count("\n") - 2
    (shipped / "de.toml").write_text(cut, encoding="utf-8")
    monkeypatch.setattr("toolkeeper.i18n.catalog.PACKAGE_DIR", shipped)
    monkeypatch.chdir(tmp_path)  # no tool_descriptions/ in the project root either
    catalog = DescriptionCatalog("de_DE.UTF-8")
    assert catalog.dirs[-2] == shipped
    de, en = _load("de"), _load("en")
    file_read: Any = localize_tool(next(t for t in tools if t.name == "file_read"), catalog)
    params = file_read.parameters["properties"]
    assert file_read.description == en["tools"]["file_read"]
    assert params["offset"]["description"] == en["parameters"]["file_read"]["offset"]
    assert params["path"]["description"] == de["parameters"]["file_read"]["path"]
    assert params["limit"]["description"] == de["parameters"]["file_read"]["limit"]
    file_write = localize_tool(next(t for t in tools if t.name == "file_write"), catalog)
    assert file_write.description == de["tools"]["file_write"]


def test_a_variant_missing_everywhere_keeps_the_tools_own_words(
        tools: list[Tool], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The unconfined shell's safety note is never replaced by the confined shell's text."""
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    for locale in ("en", "de"):
        text = (PACKAGE_DIR / f"{locale}.toml").read_text(encoding="utf-8")
        (shipped / f"{locale}.toml").write_text(
            re.sub(r'(?m)^"shell\.unconfined" = .*\n', "", text), encoding="utf-8")
    monkeypatch.setattr("toolkeeper.i18n.catalog.PACKAGE_DIR", shipped)
    monkeypatch.chdir(tmp_path)
    unconfined = next(t for t in tools if description_key(t) == "shell.unconfined")
    shown: Any = localize_tool(unconfined, DescriptionCatalog("de"))
    assert shown.description == unconfined.description and "UNCONFINED" in shown.description
    assert shown.parameters["properties"]["command"]["description"] == \
        _load("de")["parameters"]["shell"]["command"]


def test_a_workspace_file_overrides_the_shipped_one_key_by_key(
        tools: list[Tool], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The search order: the workspace's ``tool_descriptions/<locale>.toml`` first, then
    the installed package's, then the project root's."""
    workspace, root = tmp_path / "ws", tmp_path / "root"
    (workspace / "tool_descriptions").mkdir(parents=True)
    (root / "tool_descriptions").mkdir(parents=True)
    (workspace / "tool_descriptions" / "de.toml").write_text(
        '[tools]\nshell = "Befehl ausführen (Hausregel: nur make)."\n'
        '[parameters.file_read]\npath = "Pfad unter docs/."\n', encoding="utf-8")
    (root / "tool_descriptions" / "de.toml").write_text(
        '[tools]\nshell = "aus dem Projekt"\nfile_read = "aus dem Projekt"\n'
        'private_tool = "nur im Projekt"\n', encoding="utf-8")
    monkeypatch.chdir(root)
    catalog = DescriptionCatalog("de_DE.UTF-8", workspace=workspace)
    de = _load("de")
    by_name = {t.name: t for t in tools if description_key(t) is None}
    shell, file_read = (cast(Any, localize_tool(by_name[n], catalog)) for n in ("shell", "file_read"))
    assert shell.description == "Befehl ausführen (Hausregel: nur make)."  # the workspace's
    assert shell.parameters["properties"]["command"]["description"] == \
        de["parameters"]["shell"]["command"]  # the rest of the tool: the shipped file's
    assert file_read.description == de["tools"]["file_read"]  # the package beats the root
    assert file_read.parameters["properties"]["path"]["description"] == "Pfad unter docs/."
    assert catalog.description("private_tool") == "nur im Projekt"  # the root is still read


def test_the_locale_is_the_configs_then_toolkeeper_locale_then_lang_then_lc_all(
        tools: list[Tool], monkeypatch: pytest.MonkeyPatch) -> None:
    """The product's own variable first, then LANG, LC_ALL (a config's ``locale`` before all)."""
    env = {"TOOLKEEPER_LOCALE": "fr_FR.UTF-8", "LANG": "ja_JP.UTF-8", "LC_ALL": "ko_KR.UTF-8"}
    for name in ("TOOLKEEPER_LOCALE", "LANG", "LC_ALL"):
        monkeypatch.setenv(name, env[name])
    shell = next(t for t in tools if t.name == "shell" and description_key(t) is None)
    expected = {"de": "de", None: "fr", "": "fr"}
    for configured, locale in expected.items():
        assert localized_tools([shell], configured)[0].description == \
            _load(locale)["tools"]["shell"]
    monkeypatch.delenv("TOOLKEEPER_LOCALE")
    assert localized_tools([shell])[0].description == _load("ja")["tools"]["shell"]
    monkeypatch.setenv("LANG", "C.UTF-8")  # C and POSIX say nothing: the next one decides
    assert localized_tools([shell])[0].description == _load("ko")["tools"]["shell"]
    monkeypatch.setenv("LC_ALL", "POSIX")
    assert localized_tools([shell])[0].description == _load("en")["tools"]["shell"]
    monkeypatch.setenv("LANG", "pt_BR.UTF-8")
    assert localized_tools([shell])[0].description == _load("pt-BR")["tools"]["shell"]
    monkeypatch.setenv("LANG", "zh_CN.GB18030")
    assert localized_tools([shell])[0].description == _load("zh-CN")["tools"]["shell"]
