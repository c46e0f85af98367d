"""``shell``: a command line in the workspace, checked command by command, run confined."""

from __future__ import annotations

import os
from typing import Any

import bashlex

from ..errors import PolicyViolationError, SandboxLimitError, UsageError
from ..tools.metadata import ToolMetadata
from ..tools.risk import ToolRisk
from ..tools.tool import Tool
from .policy import SecurityPolicy
from .sandbox import UNPRIVILEGED_UID, probe, run_confined

__all__ = ["command_words", "shell_tool"]

_INTERPRETERS = {"python", "python3", "perl", "ruby", "node", "bash", "sh", "zsh", "dash", "env",
                 "xargs", "find", "git", "npm", "npx", "pip", "pip3", "cargo", "make", "awk",
                 "sed", "busybox", "nohup", "setsid", "timeout", "nice", "exec", "eval",
                 "source", "."}


def command_words(command: str) -> tuple[list[list[str]], list[str]]:
    """Every command of a command line (pipes, lists, substitutions included) as its words,
    and the constructs found (``substitution``, ``redirect``, ``background``, ``assignment``).

    Raises:
        PolicyViolationError: the line cannot be analysed — refused rather than guessed.
    """
    try:
        trees = bashlex.parse(command)
    except Exception as exc:  # bashlex raises several types; any failure must fail closed
        raise PolicyViolationError(
            f"the command line cannot be analysed ({type(exc).__name__}: {exc}); write it "
            "as simple commands joined by |, && or ;", tool_name="shell",
            details={"rule": "shell.parse"}) from exc
    commands: list[list[str]] = []
    constructs: set[str] = set()

    def walk(node: Any) -> None:
        kind = node.kind
        if kind == "command":
            words = [p.word for p in node.parts if p.kind == "word"]
            constructs.update("assignment" for p in node.parts if p.kind == "assignment")
            constructs.update("redirect" for p in node.parts if p.kind == "redirect")
            commands.append(words)
        elif kind in ("commandsubstitution", "processsubstitution"):
            constructs.add("substitution")
        elif kind == "operator" and getattr(node, "op", "") == "&":
            constructs.add("background")
        for attr in ("parts", "list"):
            for child in getattr(node, attr, None) or ():
                walk(child)
        child = getattr(node, "command", None)
        if child is not None and hasattr(child, "kind"):
            walk(child)

    for tree in trees:
        walk(tree)
    return commands, sorted(constructs)


def _check(command: str, policy: SecurityPolicy, confined: bool) -> None:
    commands, constructs = command_words(command)
    if not commands:
        raise PolicyViolationError("the command line runs no command", tool_name="shell")
    allowed = set(policy.allowed_commands)
    for words in commands:
        if not words:
            raise PolicyViolationError("a command without a program name is refused",
                                       tool_name="shell", details={"rule": "allowed_commands"})
        program = os.path.basename(words[0])
        if program not in allowed:
            raise PolicyViolationError(
                f"'{program}' is not an allowed command (rule security.allowed_commands); "
                f"allowed: {', '.join(sorted(allowed))}. Add it to security.allowed_commands to "
                "allow it", tool_name="shell", details={"rule": "allowed_commands"})
        if not confined and program in _INTERPRETERS:
            raise PolicyViolationError(
                f"'{program}' can run arbitrary code and is refused without a sandbox",
                tool_name="shell", details={"rule": "unconfined.interpreters"})
    if not confined and constructs:
        raise PolicyViolationError(
            f"without a sandbox these are refused: {', '.join(constructs)}",
            tool_name="shell", details={"rule": "unconfined.constructs"})


def _check_reachable(policy: SecurityPolicy) -> None:
    """As root the sandbox runs as an unprivileged uid, which must reach the workspace."""
    if os.geteuid() != 0:
        return
    for path in [policy.workspace, *policy.workspace.parents]:
        mode = path.stat()
        if mode.st_uid != UNPRIVILEGED_UID and not mode.st_mode & 0o001:
            raise UsageError(
                f"commands run as uid {UNPRIVILEGED_UID} because toolkeeper runs as root, and "
                f"{path} is not reachable by it; run toolkeeper as a non-root user, or make the "
                f"workspace's parents searchable (chmod o+x) and the workspace owned by "
                f"{UNPRIVILEGED_UID}")
    if policy.workspace.stat().st_uid != UNPRIVILEGED_UID and \
            not policy.workspace.stat().st_mode & 0o002 and policy.autonomy != "read_only":
        raise UsageError(f"the workspace {policy.workspace} is not writable by uid "
                         f"{UNPRIVILEGED_UID}, which runs the commands; chown it to "
                         f"{UNPRIVILEGED_UID} or run toolkeeper as a non-root user")


def shell_tool(policy: SecurityPolicy) -> Tool:
    """The ``shell`` tool bound to ``policy``: bubblewrap per call, or refusal without it."""
    report = probe()
    if report.available:
        _check_reachable(policy)

    def shell(command: str, approved: bool = False) -> str:
        """Run a shell command line in the workspace (sandboxed, no network by default).

        Args:
            command: The command line, e.g. "ls -la | head".
            approved: Set only when the user explicitly approved this command in supervised mode.
        """
        if policy.autonomy == "read_only":
            raise PolicyViolationError("commands are refused: security.autonomy is 'read_only'; "
                                       "set it to 'supervised' or 'full'", tool_name="shell",
                                       details={"rule": "autonomy"})
        if not report.available:
            raise PolicyViolationError(
                f"no sandbox is available ({report.detail}); commands are refused. Install "
                "bubblewrap, or set security.allow_unconfined = true (every call then needs "
                "approval)", tool_name="shell", details={"rule": "sandbox"})
        _check(command, policy, confined=True)
        env = {k: os.environ[k] for k in policy.env_passthrough if k in os.environ}
        result = run_confined(policy.workspace, ["/bin/sh", "-c", command],
                              timeout_s=policy.shell_timeout_s, output_cap=policy.max_output_bytes,
                              network=policy.network, env=env)
        if result.timed_out:
            raise SandboxLimitError(f"the command ran longer than {policy.shell_timeout_s:g} s "
                                    "and was killed with everything it started",
                                    tool_name="shell")
        text = result.stdout
        if result.stderr:
            text += ("\n" if text else "") + "[stderr]\n" + result.stderr
        if result.truncated:
            text += f"\n[output cut at {policy.max_output_bytes} bytes; the command was stopped]"
        return f"{text}\n[exit code {result.exit_code}]" if text else f"[exit code {result.exit_code}]"

    return Tool.from_function(shell, risk=ToolRisk.HIGH, metadata=ToolMetadata(
        category="development/execution", tags=frozenset({"shell", "file_system"}),
        destructive_hint=True, open_world_hint=policy.network, timeout=policy.shell_timeout_s + 5))
