"""glob_search and content_search stay inside the workspace and agree across backends."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from toolkeeper import InvalidArgumentsError, PolicyViolationError, Tool
from toolkeeper.builtins import search as module
from toolkeeper.builtins.calculator import calculator_tool
from toolkeeper.builtins.policy import SecurityPolicy


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "core.py").write_text("def alpha():\n    return 'needle'\n")
    (root / "src" / "notes.md").write_text("a needle in the notes\n")
    (root / "README.md").write_text("readme\n")
    (root / "toolkeeper.db").write_text("needle in the product's own file\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.py").write_text("needle = 'OUTSIDE'\n")
    (root / "escape").symlink_to(tmp_path / "outside")
    return root


def tools(ws: Path) -> dict[str, Tool]:
    return {t.name: t for t in module.search_tools(SecurityPolicy(workspace=ws))}


def test_glob_matches_any_depth_without_following_symlinks(ws: Path) -> None:
    glob = tools(ws)["glob_search"]
    assert glob.run_raw({"pattern": "**/*.py"}) == "src/pkg/core.py"
    assert glob.run_raw({"pattern": "*.md"}) == "README.md"
    assert glob.run_raw({"pattern": "**/*.md"}) == "README.md\nsrc/notes.md"
    assert glob.run_raw({"pattern": "*.py", "path": "src/pkg"}) == "src/pkg/core.py"
    assert "toolkeeper.db" not in glob.run_raw({"pattern": "*"})
    with pytest.raises(PolicyViolationError):
        glob.run_raw({"pattern": "*", "path": "escape"})


@pytest.mark.parametrize("backend", ["ripgrep", "grep", "python"])
def test_content_search_backends_give_the_same_lines(ws: Path, backend: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    if backend == "ripgrep" and shutil.which("rg") is None:
        pytest.skip("ripgrep is not installed")
    if backend in ("grep", "python"):
        monkeypatch.setattr(module, "_ripgrep", lambda *a: None)
    if backend == "python":
        monkeypatch.setattr(module, "_grep", lambda *a: None)
    search = tools(ws)["content_search"]
    found = sorted(search.run_raw({"pattern": "needle"}).splitlines())
    assert found == ["src/notes.md:1:a needle in the notes", "src/pkg/core.py:2:    return 'needle'"]
    assert search.run_raw({"pattern": "NEEDLE", "ignore_case": True, "glob": "*.py"}) == (
        "src/pkg/core.py:2:    return 'needle'")
    assert search.run_raw({"pattern": "needle", "path": "src/pkg"}) == (
        "src/pkg/core.py:2:    return 'needle'")


def test_content_search_refuses_bad_patterns_and_escapes(ws: Path) -> None:
    search = tools(ws)["content_search"]
    with pytest.raises(InvalidArgumentsError, match="not a valid regular expression"):
        search.run_raw({"pattern": "(unclosed"})
    with pytest.raises(PolicyViolationError):
        search.run_raw({"pattern": "needle", "path": "../outside"})
    with pytest.raises(PolicyViolationError):
        search.run_raw({"pattern": "needle", "path": "escape"})
    assert "OUTSIDE" not in search.run_raw({"pattern": "needle"})


def test_ripgrep_ignores_configuration_from_the_environment(ws: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("rg") is None:
        pytest.skip("ripgrep is not installed")
    config = tmp_path / "rgrc"
    config.write_text("--follow\n--pre=/bin/false\n")
    monkeypatch.setenv("RIPGREP_CONFIG_PATH", str(config))
    out = tools(ws)["content_search"].run_raw({"pattern": "needle"})
    assert "OUTSIDE" not in out and "core.py" in out
    assert os.environ["RIPGREP_CONFIG_PATH"] == str(config)


def test_calculator_is_safe_arithmetic() -> None:
    calc = calculator_tool()
    assert calc.run_raw({"expression": "2 ** 10 + sqrt(16)"}) == "1028.0"
    assert calc.run_raw({"expression": "factorial(5) // 7"}) == "17"
    for hostile in ('__import__("os").system("id")', "().__class__.__bases__", "9**9**9",
                    "open('/etc/passwd').read()", "[1] * 10**9"):
        with pytest.raises(InvalidArgumentsError):
            calc.run_raw({"expression": hostile})
