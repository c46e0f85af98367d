"""git_operations: real repositories, hardened against repository-configured programs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from toolkeeper import PolicyViolationError, Tool
from toolkeeper.builtins.git import git_tool
from toolkeeper.builtins.policy import SecurityPolicy
from toolkeeper.builtins.sandbox import UNPRIVILEGED_UID, probe

from .conftest import hand_over

pytestmark = pytest.mark.skipif(not probe().available or shutil.which("git") is None,
                                reason="needs bubblewrap and git")


@pytest.fixture
def ws(reachable: Path) -> Path:
    root = reachable / "ws"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "hello.txt").write_text("hello\n")
    hand_over(root)
    return root


def git(ws: Path) -> Tool:
    return git_tool(SecurityPolicy(workspace=ws))


def test_add_commit_status_log_diff(ws: Path) -> None:
    tool = git(ws)
    assert "hello.txt" in tool.run_raw({"operation": "status", "args": ["--short"]})
    tool.run_raw({"operation": "add", "args": ["hello.txt"]})
    committed = tool.run_raw({"operation": "commit", "args": ["-m", "first commit"]})
    assert "first commit" in committed and "[exit code 0]" in committed
    assert "first commit" in tool.run_raw({"operation": "log", "args": ["--oneline"]})
    (ws / "hello.txt").write_text("hello world\n")
    assert "+hello world" in tool.run_raw({"operation": "diff"})


@pytest.mark.parametrize("args", [["--output=/tmp/x"], ["--ext-diff"], ["-c", "x=y"],
                                  ["--exec-path=/tmp"], ["--upload-pack=evil"]])
def test_options_outside_the_allowlist_are_refused(ws: Path, args: list[str]) -> None:
    with pytest.raises(PolicyViolationError, match="is refused"):
        git(ws).run_raw({"operation": "diff", "args": args})


def test_repository_configured_programs_do_not_run(ws: Path) -> None:
    marker = ws / "pwned"
    hook = ws / "evil.sh"
    hook.write_text(f"#!/bin/sh\ntouch {'/workspace/pwned'}\n")
    hook.chmod(0o755)
    with (ws / ".git" / "config").open("a") as config:
        config.write("[core]\n\tfsmonitor = /workspace/evil.sh\n\tpager = /workspace/evil.sh\n")
    hooks = ws / ".git" / "hooks"
    (hooks / "pre-commit").write_text(hook.read_text())
    (hooks / "pre-commit").chmod(0o755)
    if os.geteuid() == 0:
        for path in (hook, hooks / "pre-commit"):
            os.chown(path, UNPRIVILEGED_UID, UNPRIVILEGED_UID)
    tool = git(ws)
    tool.run_raw({"operation": "status"})
    tool.run_raw({"operation": "add", "args": ["hello.txt"]})
    tool.run_raw({"operation": "commit", "args": ["-m", "x"]})
    assert not marker.exists()
