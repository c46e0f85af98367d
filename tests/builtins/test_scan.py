"""The walk that finds what a sandbox must not see: every protected entry at any depth, every
state folder, never entered; and what it keeps between walks is never stale."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolkeeper.builtins.policy import SecurityPolicy
from toolkeeper.builtins.scan import Scanner, TreeScan


def _tree(root: Path) -> None:
    for rel in ("src/app/main.py", "src/app/.envrc", "vendor/lib/.git/config", "docs/a.md",
                ".vscode/settings.json", "deep/a/b/c/d/.mcp.json", "state/token",
                "state/inner/.git/config", "go/token/lexer.go"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")


def _scan(scanner: Scanner, root: Path) -> TreeScan:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return scanner.scan(fd)
    finally:
        os.close(fd)


def _backdate(root: Path) -> None:
    """Every directory last changed long ago: the walk may keep what it read of each."""
    for path in [root, *root.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            os.utime(path, (1_000_000_000, 1_000_000_000))


def test_every_protected_entry_is_found_at_any_depth_and_none_is_entered(tmp_path: Path
                                                                         ) -> None:
    _tree(tmp_path)
    (tmp_path / "src" / "link").symlink_to("../vendor")
    found = _scan(Scanner(SecurityPolicy(workspace=tmp_path)), tmp_path)
    assert found.complete
    assert {(f.rel, f.rule) for f in found.found} == {
        ("src/app/.envrc", ".envrc"), ("vendor/lib/.git", ".git"), (".vscode", ".vscode"),
        ("deep/a/b/c/d/.mcp.json", ".mcp.json"), ("state", "toolkeeper_state")}
    only_state = _scan(Scanner(SecurityPolicy(workspace=tmp_path), state_only=True), tmp_path)
    assert [f.rel for f in only_state.found] == ["state"]  # a `token` directory is no state


def test_a_tree_too_large_to_walk_is_said_not_half_checked(tmp_path: Path) -> None:
    _tree(tmp_path)
    found = _scan(Scanner(SecurityPolicy(workspace=tmp_path), max_dirs=3), tmp_path)
    assert not found.complete


def test_what_a_walk_keeps_never_hides_a_change(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    _tree(tmp_path)
    _backdate(tmp_path)
    monkeypatch.setattr(Scanner, "RACY_NS", 0)  # trust every listing at once
    scanner = Scanner(SecurityPolicy(workspace=tmp_path))
    first = _scan(scanner, tmp_path)
    assert _scan(scanner, tmp_path) == first  # nothing changed: the same, from what it kept
    (tmp_path / "docs" / "sub" / ".git").mkdir(parents=True)  # a nested repository appears
    (tmp_path / "src" / "app" / "client-token").write_text("x")  # src/app becomes state
    os.rename(tmp_path / "deep" / "a", tmp_path / "deep" / "z")  # an entry moves
    later = _scan(scanner, tmp_path)
    fresh = _scan(Scanner(SecurityPolicy(workspace=tmp_path)), tmp_path)
    assert later == fresh
    assert {f.rel for f in later.found} >= {"docs/sub/.git", "src/app", "deep/z/b/c/d/.mcp.json"}
    assert "deep/a/b/c/d/.mcp.json" not in {f.rel for f in later.found}
