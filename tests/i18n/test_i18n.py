"""Localized descriptions: locale resolution, per-key fallback, workspace overrides, search."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolkeeper import Tool, tool
from toolkeeper.i18n import DescriptionCatalog, normalize_locale, resolve_locale
from toolkeeper.toolbox import Toolbox


@pytest.mark.parametrize(
    ("value", "expected"),
    [("zh_CN.UTF-8", "zh-CN"), ("en_US", "en-US"), ("fr", "fr"), ("C", None), ("POSIX", None),
     ("de_DE@euro", "de-DE"), (None, None)],
)
def test_normalize_locale(value: str | None, expected: str | None) -> None:
    assert normalize_locale(value) == expected


def test_resolution_order_config_then_env_variables() -> None:
    env = {"TOOLKEEPER_LOCALE": "ja_JP.UTF-8", "LANG": "de_DE.UTF-8", "LC_ALL": "fr_FR"}
    assert resolve_locale("ko", env) == "ko"
    assert resolve_locale(None, env) == "ja-JP"
    assert resolve_locale(None, {"LANG": "C", "LC_ALL": "fr_FR"}) == "fr-FR"
    assert resolve_locale("", {"LANG": "POSIX"}) == "en"


@tool
def file_read(path: str, limit: int = 100) -> str:
    """Read a file."""
    return path


def test_locale_file_with_per_key_english_fallback(tmp_path: Path) -> None:
    folder = tmp_path / "tool_descriptions"
    folder.mkdir()
    (folder / "en.toml").write_text('[tools]\nfile_read = "Read a file with line numbers."\n'
                                    'other = "English only"\n')
    (folder / "zh-CN.toml").write_text('[tools]\nfile_read = "读取文件内容并显示行号。"\n'
                                       '[parameters.file_read]\npath = "要读取的文件路径。"\n')
    catalog = DescriptionCatalog("zh_CN.UTF-8", workspace=tmp_path)
    assert catalog.description("file_read") == "读取文件内容并显示行号。"
    assert catalog.description("other") == "English only"
    assert catalog.description("missing", "own text") == "own text"
    view = Toolbox([file_read]).localized(catalog=catalog)
    localized: Any = view.get("file_read")
    assert localized.description == "读取文件内容并显示行号。"
    assert localized.parameters["properties"]["path"]["description"] == "要读取的文件路径。"
    assert localized.run_raw({"path": "a.txt"}) == "a.txt"  # validation and call unchanged
    assert file_read.description == "Read a file."
    assert view.search("读取文件")[0].name == "file_read"


def test_shipped_locales_cover_the_meta_tools() -> None:
    view = Toolbox().with_tool_search().localized("zh-CN")
    assert view.lookup("tool_search").description.startswith("按功能搜索")
    english = Toolbox().with_tool_search().localized("en")
    assert english.lookup("tool_search").description.startswith("Search for more tools")


def test_workspace_files_override_shipped_ones(tmp_path: Path) -> None:
    folder = tmp_path / "tool_descriptions"
    folder.mkdir()
    (folder / "en.toml").write_text('[tools]\ntool_search = "Find tools (custom)."\n')
    view = Toolbox().with_tool_search().localized("en", workspace=tmp_path)
    assert view.lookup("tool_search").description == "Find tools (custom)."


def test_unlocalized_tools_keep_their_own_description() -> None:
    plain = Tool.from_function(lambda: 1, name="plain_tool", description="Own words")
    assert Toolbox([plain]).localized("zh-CN").lookup("plain_tool").description == "Own words"
