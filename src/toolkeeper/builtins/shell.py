"""``shell``: a command line in the workspace, checked command by command, run confined."""

from __future__ import annotations

import errno
import os
from typing import Any

from ..core.metadata import ToolMetadata
from ..core.risk import ToolRisk
from ..errors import (
    InvalidArgumentsError,
    PolicyViolationError,
    SandboxLimitError,
    SandboxUnavailableError,
)
from ..extras import missing
from ..sandbox import (
    UNPRIVILEGED_UID,
    Limits,
    Overlay,
    RunOptions,
    Sandbox,
    SandboxResult,
    UnconfinedSandbox,
    default_sandbox,
    new_overlay,
    probe,
)
from ..tools.tool import Tool
from .policy import SecurityPolicy
from .preflight import Preflight
from .protected import Protection

__all__ = ["command_words", "root_limits", "sandbox_blocker", "shell_tool"]

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
        import bashlex  # builds its parser tables on import (~170 ms): only when a shell runs
    except ImportError as exc:  # no parser, no analysis: the command does not run
        raise missing("builtins", "the shell tool's command analysis") from exc

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


def sandbox_blocker(policy: SecurityPolicy, sandbox: Sandbox | None = None
                    ) -> str | None:
    """Why commands cannot run confined for this policy, or ``None`` when they can.

    ``sandbox`` defaults to the backend the host's probe picks (``None`` when none). As root,
    commands run as an unprivileged uid, which must reach the workspace; it must also be able
    to write it, unless the sandbox writes through a copy-on-write view (whose upper layer
    that uid owns: see ``root_limits`` for what it still cannot change).
    """
    sandbox = sandbox or default_sandbox()
    if sandbox is None:
        return f"no sandbox is available ({probe().detail})"
    if not sandbox.confined:
        return "the chosen sandbox does not confine commands"
    if os.geteuid() != 0:
        return None
    for path in [policy.workspace, *policy.workspace.parents]:
        try:
            info = path.stat()
        except FileNotFoundError:
            return f"the workspace {policy.workspace} does not exist; create it"
        if info.st_uid != UNPRIVILEGED_UID and not info.st_mode & 0o001:
            return (f"commands run as uid {UNPRIVILEGED_UID} because toolkeeper runs as root, "
                    f"and {path} is not reachable by it; run toolkeeper as a non-root user, or "
                    "make the workspace's parents searchable (chmod o+x)" + (
                        "" if sandbox.overlays else
                        f" and the workspace owned by {UNPRIVILEGED_UID}"))
    # with a view, writes go through an upper layer that uid owns
    if policy.autonomy == "read_only" or _writable(policy.workspace.stat()) or sandbox.overlays:
        return None
    return (f"the workspace {policy.workspace} is not writable by uid {UNPRIVILEGED_UID}, "
            f"which runs the commands because toolkeeper runs as root; chown it to "
            f"{UNPRIVILEGED_UID} or run toolkeeper as a non-root user")


def _writable(info: os.stat_result) -> bool:
    """Whether the sandbox's unprivileged uid may write a file or folder with ``info``."""
    return info.st_uid == UNPRIVILEGED_UID or bool(info.st_mode & 0o002)


def root_limits(policy: SecurityPolicy, sandbox: Sandbox | None = None) -> str | None:
    """What commands cannot change though they run: as root they run as an unprivileged
    uid, which creates and removes entries through the copy-on-write view but cannot change a
    file or folder that belongs to root — those in the workspace now, and those the file tools
    (which run as root) write. ``None`` when nothing is limited."""
    sandbox = sandbox or default_sandbox()
    if os.geteuid() != 0 or policy.autonomy == "read_only" or sandbox is None \
            or sandbox_blocker(policy, sandbox) is not None:
        return None
    with os.scandir(policy.workspace) as entries:
        owned = sorted(e.name + ("/" if e.is_dir(follow_symlinks=False) else "")
                       for e in entries if not _writable(e.stat(follow_symlinks=False)))
    now = f"; now {', '.join(owned[:3])}{', …' if len(owned) > 3 else ''}" if owned else ""
    return (f"its commands run as uid {UNPRIVILEGED_UID} because toolkeeper runs as root, so "
            f"they cannot change files and folders of the workspace that belong to root (those "
            f"the file tools write{now}); run toolkeeper as a non-root user, or chown -R "
            f"{UNPRIVILEGED_UID} {policy.workspace}")


def shell_tool(policy: SecurityPolicy, *, sandbox: Sandbox | None = None) -> Tool:
    """The ``shell`` tool bound to ``policy``: one sandbox per call (``sandbox``, by default
    the best backend of this host); without one it is refused, unless
    ``security.allow_unconfined`` — then stricter checks apply and every call needs approval
    (the tool is CRITICAL with a BLOCKING HITL mode)."""
    sandbox = sandbox or default_sandbox()
    blocker = sandbox_blocker(policy, sandbox)
    runner: Sandbox | None = sandbox if blocker is None else (
        UnconfinedSandbox() if policy.allow_unconfined else None)
    protection = Protection(policy)

    def standing() -> PolicyViolationError | None:
        """The refusal of every call, whatever its command line."""
        if policy.autonomy == "read_only":
            return PolicyViolationError("commands are refused: security.autonomy is "
                                        "'read_only'; set it to 'supervised' or 'full'",
                                        tool_name="shell", details={"rule": "autonomy"})
        if runner is None:
            return PolicyViolationError(
                f"commands are refused: {blocker}. Fix that, or set "
                "security.allow_unconfined = true (every call then needs approval)",
                tool_name="shell", details={"rule": "sandbox"})
        return None

    def refuse(command: str, approved: bool = False) -> None:
        """The rules a command line meets before it runs (the tool's pre-flight too)."""
        refusal = standing()
        if refusal is not None:
            raise refusal
        assert runner is not None
        _check(command, policy, confined=runner.confined)

    def shell(command: str, approved: bool = False) -> str:
        """Run a shell command line in the workspace (sandboxed, no network by default).

        Args:
            command: The command line, e.g. "ls -la | head".
            approved: Accepted for compatibility. It never stands in for approval: a model
                cannot approve its own call; the invoker's approval gate does.
        """
        refuse(command)
        assert runner is not None
        env = {k: os.environ[k] for k in policy.env_passthrough if k in os.environ}
        before = protection.state()
        # Unconfined, every host path is reachable anyway and every call is approved.
        hidden = protection.prepare(runner, before, tool="shell") if runner.confined else ()
        limits = Limits(cpu_s=max(1, int(policy.shell_timeout_s) + 1),
                        memory=policy.max_memory_bytes)
        overlay = _new_overlay() if runner.overlays else None
        try:
            result = runner.run(policy.workspace, ["/bin/sh", "-c", command], RunOptions(
                timeout_s=policy.shell_timeout_s, output_cap=policy.max_output_bytes,
                network=policy.network, env=env, limits=limits, hidden=hidden,
                overlay=overlay))
        except OSError as exc:
            if exc.errno == errno.E2BIG:
                raise InvalidArgumentsError(
                    f"the command line is too long to run ({len(command)} characters); write "
                    "long data to a file with file_write and refer to the file",
                    tool_name="shell") from exc
            raise SandboxUnavailableError(
                f"the sandbox could not start ({exc.strerror or exc}); nothing ran",
                tool_name="shell") from exc
        finally:
            refused = protection.settle(before, overlay, "the command")
        return _report(result, policy, refused)

    preflight = Preflight(refuse, blocked=lambda: _message(standing()),
                          limited=lambda: root_limits(policy, sandbox) if runner else None)
    metadata = ToolMetadata(
        category="development/execution", tags=frozenset({"shell", "file_system"}),
        destructive_hint=True, open_world_hint=policy.network, timeout=policy.shell_timeout_s + 5,
        extra={"security_policy": policy})  # the approval page shows the sandbox it runs under
    if runner is not None and runner.confined:
        return Tool.from_function(shell, risk=ToolRisk.HIGH, metadata=metadata,
                                  preflight=preflight)
    # Its own description variant, so a translation never drops the UNCONFINED note.
    metadata = metadata.model_copy(update={"extra": {**metadata.extra,
                                                     "i18n": {"key": "shell.unconfined"}}})
    return Tool.from_function(
        shell, risk=ToolRisk.CRITICAL, hitl_mode="blocking", metadata=metadata,
        preflight=preflight,
        description="Run a shell command line in the workspace. UNCONFINED: no sandbox is "
                    "available, so every call needs a human's approval.")


def _message(refusal: PolicyViolationError | None) -> str | None:
    """A refusal of every call, as a start line tells it."""
    return refusal.message.removeprefix("commands are refused: ") if refusal else None


def _new_overlay() -> Overlay:
    try:
        return new_overlay()
    except OSError as exc:
        raise SandboxUnavailableError(f"the sandbox could not start (its private directory: "
                                      f"{exc.strerror or exc}); nothing ran",
                                      tool_name="shell") from exc


def _report(result: SandboxResult, policy: SecurityPolicy, refused: str) -> str:
    if result.start_error:
        raise SandboxUnavailableError(
            f"the sandbox could not start ({result.start_error}); the command did not run. "
            "Try again later; if it keeps failing, the operator can check `toolkeeper doctor`",
            tool_name="shell")
    if result.timed_out:
        raise SandboxLimitError(f"the command ran longer than {policy.shell_timeout_s:g} s "
                                "and was killed with everything it started", tool_name="shell")
    text = result.stdout
    if result.stderr:
        text += ("\n" if text else "") + "[stderr]\n" + result.stderr
    if result.truncated:
        text += f"\n[output cut at {policy.max_output_bytes} bytes; the command was stopped]"
    if result.oom_killed:
        text += (f"\n[killed: the command went over its memory limit of "
                 f"{policy.max_memory_bytes >> 20} MiB (rule security.max_memory_mb)]")
    if refused:
        text += "\n" + refused
    code = f"[exit code {result.exit_code}]"
    return f"{text}\n{code}" if text else code
