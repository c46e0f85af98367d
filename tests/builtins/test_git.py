"""git_operations: real repositories, hardened against repository-configured programs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from toolkeeper import PolicyViolationError, Tool
from toolkeeper.builtins.git import git_tool
from toolkeeper.builtins.policy import SecurityPolicy
from toolkeeper.sandbox import (
    UNPRIVILEGED_UID,
    BubblewrapSandbox,
    LandlockSandbox,
    Sandbox,
)

from ..workspaces import hand_over


@pytest.fixture(params=[BubblewrapSandbox, LandlockSandbox], ids=["bubblewrap", "landlock"])
def backend(request: pytest.FixtureRequest) -> Sandbox:
    """git runs the same under both confining backends."""
    return request.param()  # type: ignore[no-any-return]


@pytest.fixture
def ws(reachable: Path) -> Path:
    root = reachable / "ws"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True, timeout=60)
    (root / "hello.txt").write_text("hello\n")
    hand_over(root)
    return root


def git(ws: Path, backend: Sandbox | None = None) -> Tool:
    return git_tool(SecurityPolicy(workspace=ws), sandbox=backend or BubblewrapSandbox())


def test_add_commit_status_log_diff(ws: Path, backend: Sandbox) -> None:
    tool = git(ws, backend)
    assert "hello.txt" in str(tool.run_raw({"operation": "status", "args": ["--short"]}))
    tool.run_raw({"operation": "add", "args": ["hello.txt"]})
    committed = str(tool.run_raw({"operation": "commit", "args": ["-m", "first commit"]}))
    assert "first commit" in committed and "[exit code 0]" in committed
    assert "first commit" in str(tool.run_raw({"operation": "log", "args": ["--oneline"]}))
    (ws / "hello.txt").write_text("hello world\n")
    assert "+hello world" in str(tool.run_raw({"operation": "diff"}))


@pytest.mark.parametrize("args", [["--output=/tmp/x"], ["--ext-diff"], ["-c", "x=y"],
                                  ["--exec-path=/tmp"], ["--upload-pack=evil"]])
def test_options_outside_the_allowlist_are_refused(ws: Path, args: list[str]) -> None:
    with pytest.raises(PolicyViolationError, match="is refused"):
        git(ws).run_raw({"operation": "diff", "args": args})


def test_repository_configured_programs_do_not_run(ws: Path, backend: Sandbox) -> None:
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
    tool = git(ws, backend)
    tool.run_raw({"operation": "status"})
    tool.run_raw({"operation": "add", "args": ["hello.txt"]})
    tool.run_raw({"operation": "commit", "args": ["-m", "x"]})
    assert not marker.exists()


def test_host_and_user_git_configuration_is_not_read(ws: Path, backend: Sandbox) -> None:
    """HOME is the workspace, so a planted .gitconfig would be the user config; and the
    host's /etc/gitconfig is not readable under Landlock. git reads neither."""
    (ws / ".gitconfig").write_text("[diff]\n\tnoprefix = true\n")
    hand_over(ws)
    tool = git(ws, backend)
    tool.run_raw({"operation": "add", "args": ["hello.txt"]})
    tool.run_raw({"operation": "commit", "args": ["-m", "first"]})
    (ws / "hello.txt").write_text("changed\n")
    diff = str(tool.run_raw({"operation": "diff"}))
    assert "--- a/hello.txt" in diff and "[exit code 0]" in diff
