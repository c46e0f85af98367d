"""``git_operations``: status, diff, log, show, add and commit — in the sandbox, hardened.

Repository configuration can run programs (``core.fsmonitor``, hooks, pagers, external diffs,
signing programs), so git runs in the same bubblewrap sandbox as ``shell``, with those settings
pinned on the command line, no system or user configuration, and the repository named
explicitly (``GIT_DIR``, ``GIT_COMMON_DIR``, ``GIT_WORK_TREE``): a ``commondir`` or ``gitdir:``
file never leads git to a configuration elsewhere. Only a small set of options is accepted.

What git writes goes through a copy-on-write view of the workspace, like ``shell``: only the
repository's objects, refs, logs, index and ``HEAD`` reach the workspace — never its
configuration, hooks or anything outside ``.git``. git sees the workspace as it is (hiding a
protected file from it would show git that file as deleted), except toolkeeper state folders.
"""

from __future__ import annotations

import stat
from typing import Literal

from ..core.metadata import ToolMetadata
from ..core.risk import ToolRisk
from ..errors import PolicyViolationError, SandboxLimitError
from ..sandbox import RunOptions, Sandbox, default_sandbox, new_overlay
from ..tools.tool import Tool
from .fs import lstat_beneath
from .policy import SecurityPolicy
from .preflight import Preflight
from .protected import Protection
from .shell import root_limits, sandbox_blocker

__all__ = ["PINNED", "WRITES", "git_tool", "judge"]

Operation = Literal["status", "diff", "log", "show", "add", "commit"]
_OPTIONS: dict[str, frozenset[str]] = {
    "status": frozenset({"--short", "-s", "--branch", "-b", "--porcelain"}),
    "diff": frozenset({"--stat", "--cached", "--staged", "--name-only", "--name-status"}),
    "log": frozenset({"--oneline", "--stat", "-n", "--max-count", "--name-only", "-p"}),
    "show": frozenset({"--stat", "--name-only", "--oneline"}),
    "add": frozenset({"--all", "-A", "--"}),
    "commit": frozenset({"-m", "--message", "--allow-empty"}),
}
_TAKES_VALUE = {"-n", "--max-count", "-m", "--message"}
PINNED = {
    "core.fsmonitor": "", "core.hooksPath": "/dev/null", "core.pager": "cat",
    "core.sshCommand": "false", "core.askPass": "false", "core.editor": "false",
    "core.attributesFile": "/dev/null", "core.excludesFile": "/dev/null",
    "credential.helper": "", "diff.external": "", "protocol.allow": "never",
    "gpg.program": "false", "commit.gpgSign": "false", "tag.gpgSign": "false",
    "log.showSignature": "false", "sequence.editor": "false", "gc.auto": "0",
    "maintenance.auto": "false", "safe.directory": "/workspace",
    "user.name": "toolkeeper", "user.email": "toolkeeper@localhost",
}
"""Settings that can run a program or point git elsewhere, fixed on the command line (which
wins over every configuration file)."""
_HARDENING = [arg for key, value in PINNED.items() for arg in ("-c", f"{key}={value}")]
# Host and user configuration never applies, and the repository is the .git of the workspace
# (every run starts at its root):
# a planted commondir or gitdir file is not followed to another configuration.
_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_TERMINAL_PROMPT": "0",
        "GIT_OPTIONAL_LOCKS": "0", "GIT_ATTR_NOSYSTEM": "1", "GIT_DIR": ".git",
        "GIT_COMMON_DIR": ".git", "GIT_WORK_TREE": ".",
        "GIT_CEILING_DIRECTORIES": "/"}
WRITES = (".git/objects", ".git/refs", ".git/logs", ".git/index", ".git/HEAD",
          ".git/COMMIT_EDITMSG", ".git/ORIG_HEAD")
"""What of git's writes reaches the workspace: the repository's data, never its configuration
(``config``, ``commondir``, ``config.worktree``, ``info/``, hooks) or an alternate object store
(``objects/info``)."""


def _check_args(operation: str, args: list[str]) -> None:
    allowed = _OPTIONS[operation]
    expect_value = False
    for arg in args:
        if expect_value:
            expect_value = False
            continue
        if arg.startswith("-") and arg != "--":
            if arg not in allowed:
                raise PolicyViolationError(
                    f"git {operation} option {arg!r} is refused (allowed: "
                    f"{', '.join(sorted(allowed)) or 'none'})", tool_name="git_operations",
                    details={"rule": "git.options"})
            expect_value = arg in _TAKES_VALUE


def judge(rel: str, directory: bool) -> str | None:
    """Why a change git made at ``rel`` does not reach the workspace (``None``: it does)."""
    if rel == ".git" and directory:
        return None
    if rel.startswith(".git/objects/info") or rel.endswith(".lock") or not any(
            rel == prefix or rel.startswith(prefix + "/") for prefix in WRITES):
        return ("git_operations changes only the repository's objects, refs, logs, index and "
                "HEAD")
    return None


def _check_repository(protection: Protection) -> None:
    """Refuse a repository git would leave the workspace's ``.git`` for: ``.git`` a file or a
    link (``gitdir:``), or a ``.git/commondir`` (git's ref store follows it whatever
    ``GIT_COMMON_DIR`` says)."""
    found = lstat_beneath(protection.ws.fd, ".git")
    if found is not None and not (found[0] == ".git" and stat.S_ISDIR(found[1].st_mode)):
        raise PolicyViolationError(
            "the workspace's .git is not a directory (a gitdir file or a link, which would lead "
            "git to a repository and a configuration outside the workspace); git_operations "
            "works on a repository kept in the workspace's own .git directory",
            tool_name="git_operations", details={"rule": "git.repository"})
    if found is not None and lstat_beneath(protection.ws.fd, ".git/commondir") is not None:
        raise PolicyViolationError(
            "the repository has a .git/commondir, which points git at another repository's "
            "data (a linked worktree's, or a planted one); git_operations works on a "
            "repository without one — remove it if you did not make it",
            tool_name="git_operations", details={"rule": "git.repository"})


def git_tool(policy: SecurityPolicy, *, sandbox: Sandbox | None = None) -> Tool:
    """The ``git_operations`` tool bound to ``policy``, run in ``sandbox`` (by default the
    best backend of this host)."""
    sandbox = sandbox or default_sandbox()
    protection = Protection(policy, state_only=True)

    def blocked() -> str | None:
        blocker = sandbox_blocker(policy, sandbox)
        return None if blocker is None else f"git runs only in the sandbox: {blocker}"

    def refuse(operation: Operation, args: list[str] | None = None) -> None:
        """The rules a git call meets before it runs (the tool's pre-flight too): its
        options, autonomy, the sandbox, and a repository kept in the workspace's .git."""
        _check_args(operation, list(args or []))
        if operation in ("add", "commit") and policy.autonomy == "read_only":
            raise PolicyViolationError(f"git {operation} writes and security.autonomy is "
                                       "'read_only'", tool_name="git_operations",
                                       details={"rule": "autonomy"})
        reason = blocked()
        if reason is not None:
            raise PolicyViolationError(reason, tool_name="git_operations",
                                       details={"rule": "sandbox"})
        _check_repository(protection)

    def git_operations(operation: Operation, args: list[str] | None = None) -> str:
        """Run a git command in the workspace: status, diff, log, show, add or commit.

        Args:
            operation: The git command.
            args: Its arguments: paths, a revision, or allowed options such as --stat or
                -m "message".
        """
        args = list(args or [])
        refuse(operation, args)
        assert sandbox is not None
        safe = ["--no-ext-diff", "--no-textconv"] if operation in ("diff", "log", "show") else []
        before = protection.state()
        hidden = protection.prepare(sandbox, before, tool="git_operations")
        overlay = new_overlay() if sandbox.overlays else None
        try:
            result = sandbox.run(policy.workspace, ["git", *_HARDENING, operation, *safe, *args],
                                 RunOptions(timeout_s=policy.shell_timeout_s,
                                            output_cap=policy.max_output_bytes, env=_ENV,
                                            hidden=hidden, overlay=overlay))
        finally:
            refused = protection.settle(before, overlay, "git", judge)
        if result.timed_out:
            raise SandboxLimitError("git ran too long and was stopped", tool_name="git_operations")
        text = result.stdout + (f"\n[stderr]\n{result.stderr}" if result.stderr else "")
        return f"{text.strip()}\n[exit code {result.exit_code}]" + (
            f"\n{refused}" if refused else "")

    return Tool.from_function(git_operations, risk=ToolRisk.HIGH, metadata=ToolMetadata(
        category="development/project", tags=frozenset({"git", "file_system"}),
        destructive_hint=False), preflight=Preflight(
            refuse, blocked=blocked, limited=lambda: root_limits(policy, sandbox)))
