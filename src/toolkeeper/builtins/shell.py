"""``shell``: a command line in the workspace, checked command by command, run confined."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import bashlex

from ..errors import PolicyViolationError, SandboxLimitError
from ..tools.metadata import ToolMetadata
from ..tools.risk import ToolRisk
from ..tools.tool import Tool
from .policy import SecurityPolicy
from .sandbox import UNPRIVILEGED_UID, Limits, probe, run_sandboxed, run_unconfined

__all__ = ["command_words", "sandbox_blocker", "shell_tool"]

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


def sandbox_blocker(policy: SecurityPolicy) -> str | None:
    """Why commands cannot run confined for this policy, or ``None`` when they can."""
    report = probe()
    if not report.available:
        return f"no sandbox is available ({report.detail})"
    if os.geteuid() != 0:
        return None
    # As root the sandbox runs as an unprivileged uid, which must reach the workspace.
    for path in [policy.workspace, *policy.workspace.parents]:
        info = path.stat()
        if info.st_uid != UNPRIVILEGED_UID and not info.st_mode & 0o001:
            return (f"commands run as uid {UNPRIVILEGED_UID} because toolkeeper runs as root, "
                    f"and {path} is not reachable by it; run toolkeeper as a non-root user, or "
                    f"make the workspace's parents searchable (chmod o+x) and the workspace "
                    f"owned by {UNPRIVILEGED_UID}")
    info = policy.workspace.stat()
    if info.st_uid != UNPRIVILEGED_UID and not info.st_mode & 0o002 \
            and policy.autonomy != "read_only":
        return (f"the workspace {policy.workspace} is not writable by uid {UNPRIVILEGED_UID}, "
                f"which runs the commands because toolkeeper runs as root; chown it to "
                f"{UNPRIVILEGED_UID} or run toolkeeper as a non-root user")
    return None


def _existing_protected(policy: SecurityPolicy) -> list[str]:
    return [p for p in policy.protected_paths() if os.path.lexists(policy.workspace / p)]


def _bindable(policy: SecurityPolicy, existing: list[str]) -> list[str]:
    """The existing protected paths with no symlink on the way: a bind follows symlinks, and
    must never bring a path from outside the workspace into the sandbox."""
    def plain(rel: str) -> bool:
        parts = Path(rel).parts
        return not any((policy.workspace.joinpath(*parts[:i])).is_symlink()
                       for i in range(1, len(parts) + 1))
    return [p for p in existing if plain(p)]


def _remove_created(policy: SecurityPolicy, before: list[str]) -> list[str]:
    """Protected paths the command created (they may not exist yet, so a bind cannot guard
    them); removed after the call, when nothing the command started is left running."""
    created = [p for p in _existing_protected(policy) if p not in before]
    for rel in created:
        target = policy.workspace / rel
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target, ignore_errors=True)
        else:
            target.unlink(missing_ok=True)
    return created


def shell_tool(policy: SecurityPolicy) -> Tool:
    """The ``shell`` tool bound to ``policy``: bubblewrap per call; without a sandbox it is
    refused, unless ``security.allow_unconfined`` — then stricter checks apply and every call
    needs approval (the tool is CRITICAL with a BLOCKING HITL mode)."""
    blocker = sandbox_blocker(policy)
    confined = blocker is None

    def shell(command: str, approved: bool = False) -> str:
        """Run a shell command line in the workspace (sandboxed, no network by default).

        Args:
            command: The command line, e.g. "ls -la | head".
            approved: Seed 004's flag, accepted for compatibility. It never stands in for
                approval: a model cannot approve its own call; the invoker's approval gate does.
        """
        if policy.autonomy == "read_only":
            raise PolicyViolationError("commands are refused: security.autonomy is 'read_only'; "
                                       "set it to 'supervised' or 'full'", tool_name="shell",
                                       details={"rule": "autonomy"})
        if not confined and not policy.allow_unconfined:
            raise PolicyViolationError(
                f"commands are refused: {blocker}. Fix that, or set "
                "security.allow_unconfined = true (every call then needs approval)",
                tool_name="shell", details={"rule": "sandbox"})
        _check(command, policy, confined=confined)
        env = {k: os.environ[k] for k in policy.env_passthrough if k in os.environ}
        argv = ["/bin/sh", "-c", command]
        before = _existing_protected(policy)
        limits = Limits(cpu_s=max(1, int(policy.shell_timeout_s) + 1),
                        memory=policy.max_memory_bytes)
        try:
            if confined:
                result = run_sandboxed(
                    policy.workspace, argv, timeout_s=policy.shell_timeout_s,
                    output_cap=policy.max_output_bytes, network=policy.network, env=env,
                    read_only=_bindable(policy, before), limits=limits)
            else:
                result = run_unconfined(policy.workspace, argv, timeout_s=policy.shell_timeout_s,
                                        output_cap=policy.max_output_bytes, env=env,
                                        limits=limits)
        finally:
            created = _remove_created(policy, before)
        if result.timed_out:
            raise SandboxLimitError(f"the command ran longer than {policy.shell_timeout_s:g} s "
                                    "and was killed with everything it started",
                                    tool_name="shell")
        text = result.stdout
        if result.stderr:
            text += ("\n" if text else "") + "[stderr]\n" + result.stderr
        if result.truncated:
            text += f"\n[output cut at {policy.max_output_bytes} bytes; the command was stopped]"
        if result.oom_killed:
            text += (f"\n[killed: the command went over its memory limit of "
                     f"{policy.max_memory_bytes >> 20} MiB (rule security.max_memory_mb)]")
        if created:
            text += (f"\n[refused: the command created protected paths ({', '.join(created)}); "
                     "they were removed (rule security.forbidden_paths)]")
        return f"{text}\n[exit code {result.exit_code}]" if text else f"[exit code {result.exit_code}]"

    metadata = ToolMetadata(
        category="development/execution", tags=frozenset({"shell", "file_system"}),
        destructive_hint=True, open_world_hint=policy.network, timeout=policy.shell_timeout_s + 5)
    if confined:
        return Tool.from_function(shell, risk=ToolRisk.HIGH, metadata=metadata)
    return Tool.from_function(
        shell, risk=ToolRisk.CRITICAL, hitl_mode="blocking", metadata=metadata,
        description="Run a shell command line in the workspace. UNCONFINED: no sandbox is "
                    "available, so every call needs a human's approval.")
