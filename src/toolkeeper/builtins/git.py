"""``git_operations``: status, diff, log, show, add and commit — in the sandbox, hardened.

Repository configuration can run programs (``core.fsmonitor``, hooks, pagers, external diffs), so
git runs in the same bubblewrap sandbox as ``shell``, with those settings overridden on the
command line, and only a small set of options is accepted.
"""

from __future__ import annotations

from typing import Literal

from ..core.metadata import ToolMetadata
from ..core.risk import ToolRisk
from ..errors import PolicyViolationError, SandboxLimitError
from ..sandbox import RunOptions, Sandbox, default_sandbox
from ..tools.tool import Tool
from .policy import SecurityPolicy
from .shell import sandbox_blocker

__all__ = ["git_tool"]

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
_HARDENING = ["-c", "core.fsmonitor=", "-c", "core.hooksPath=/dev/null", "-c", "core.pager=cat",
              "-c", "core.sshCommand=false", "-c", "protocol.allow=never",
              "-c", "safe.directory=/workspace", "-c", "user.name=toolkeeper",
              "-c", "user.email=toolkeeper@localhost", "--no-pager"]
# Host and user configuration never applies: the repository's own config is all git reads
# (and the hardening above overrides what in it could run programs).
_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_TERMINAL_PROMPT": "0",
        "GIT_OPTIONAL_LOCKS": "0"}


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


def git_tool(policy: SecurityPolicy, *, sandbox: Sandbox | None = None) -> Tool:
    """The ``git_operations`` tool bound to ``policy``, run in ``sandbox`` (by default the
    best backend of this host)."""
    sandbox = sandbox or default_sandbox()

    def git_operations(operation: Operation, args: list[str] | None = None) -> str:
        """Run a git command in the workspace: status, diff, log, show, add or commit.

        Args:
            operation: The git command.
            args: Its arguments: paths, a revision, or allowed options such as --stat or
                -m "message".
        """
        args = list(args or [])
        _check_args(operation, args)
        if operation in ("add", "commit") and policy.autonomy == "read_only":
            raise PolicyViolationError(f"git {operation} writes and security.autonomy is "
                                       "'read_only'", tool_name="git_operations",
                                       details={"rule": "autonomy"})
        blocker = sandbox_blocker(policy, sandbox)
        if blocker is not None or sandbox is None:
            raise PolicyViolationError(f"git runs only in the sandbox: {blocker}",
                                       tool_name="git_operations", details={"rule": "sandbox"})
        safe = ["--no-ext-diff", "--no-textconv"] if operation in ("diff", "log", "show") else []
        result = sandbox.run(policy.workspace, ["git", *_HARDENING, operation, *safe, *args],
                             RunOptions(timeout_s=policy.shell_timeout_s,
                                        output_cap=policy.max_output_bytes, env=_ENV))
        if result.timed_out:
            raise SandboxLimitError("git ran too long and was stopped", tool_name="git_operations")
        text = result.stdout + (f"\n[stderr]\n{result.stderr}" if result.stderr else "")
        return f"{text.strip()}\n[exit code {result.exit_code}]"

    return Tool.from_function(git_operations, risk=ToolRisk.HIGH, metadata=ToolMetadata(
        category="development/project", tags=frozenset({"git", "file_system"}),
        destructive_hint=False))
