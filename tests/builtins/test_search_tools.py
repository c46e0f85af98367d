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
    (root / "toolkeeper.toml").write_text("needle in the product's own file\n")
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
    # relative to the workspace too, not only to the folder searched
    assert glob.run_raw({"pattern": "src/**/*.py", "path": "src"}) == "src/pkg/core.py"
    assert "toolkeeper.toml" not in str(glob.run_raw({"pattern": "*"}))
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
    found = sorted(str(search.run_raw({"pattern": "needle"})).splitlines())
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
    assert "OUTSIDE" not in str(search.run_raw({"pattern": "needle"}))


def test_ripgrep_ignores_configuration_from_the_environment(ws: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("rg") is None:
        pytest.skip("ripgrep is not installed")
    config = tmp_path / "rgrc"
    config.write_text("--follow\n--pre=/bin/false\n")
    monkeypatch.setenv("RIPGREP_CONFIG_PATH", str(config))
    out = str(tools(ws)["content_search"].run_raw({"pattern": "needle"}))
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


@pytest.mark.parametrize("backend", ["ripgrep", "grep", "python"])
def test_search_refuses_hard_links_like_file_read(ws: Path, tmp_path: Path, backend: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A file hard-linked from outside the workspace is refused by file_read; the searches
    use the same rule set and show nothing of it either."""
    from toolkeeper.builtins.code_search import code_search_tool

    os.link(tmp_path / "outside" / "secret.py", ws / "linked.py")
    if backend in ("grep", "python"):
        monkeypatch.setattr(module, "_ripgrep", lambda *a: None)
    if backend == "python":
        monkeypatch.setattr(module, "_grep", lambda *a: None)
    out = str(tools(ws)["content_search"].run_raw({"pattern": "needle"}))
    assert "OUTSIDE" not in out and "core.py" in out
    code = str(code_search_tool(SecurityPolicy(workspace=ws)).run_raw({"query": "needle OUTSIDE"}))
    assert "OUTSIDE" not in code


def test_search_output_is_streamed_under_the_cap_not_buffered(ws: Path) -> None:
    """64 MiB of matching lines: the host never holds ripgrep's whole output (it once cost
    six times the data in host memory); the call stops at the output cap."""
    import tracemalloc

    with (ws / "big.txt").open("w") as big:
        for _ in range(64):
            big.write("needle needle needle\n" * ((1 << 20) // 21))
    for i in range(3000):
        (ws / f"needle-{i:04d}-{'n' * 200}.txt").write_text("needle\n")
    policy = SecurityPolicy(workspace=ws, max_output_bytes=64 << 10, max_file_bytes=1 << 20)
    search = {t.name: t for t in module.search_tools(policy)}["content_search"]
    tracemalloc.start()
    try:
        out = str(search.run_raw({"pattern": "needle", "limit": 100_000}))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "stopped at its time or output limit" in out or "stopped at 65536 bytes" in out
    assert len(out.encode()) < (64 << 10) + 4096
    assert peak < 16 << 20, f"the search held {peak >> 20} MiB in host memory"


def test_names_with_control_characters_are_escaped_in_search_results(ws: Path) -> None:
    (ws / "evil\x1b[2Jname.md").write_text("needle\n")
    t = tools(ws)
    listed = str(t["glob_search"].run_raw({"pattern": "*.md"}))
    found = str(t["content_search"].run_raw({"pattern": "needle", "glob": "evil*"}))
    for out in (listed, found):
        assert "\x1b" not in out and "evil\\x1b[2Jname.md" in out
