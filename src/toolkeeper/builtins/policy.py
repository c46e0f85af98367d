"""``SecurityPolicy``: what built-in tools may touch, injected into each at construction.

Deny by default. Every refusal is a ``PolicyViolationError`` naming the rule that fired and how
to allow the thing.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..errors import ConfigError, PolicyViolationError
from .state_dirs import RULE as STATE_RULE
from .state_dirs import STATE_FILES, STATE_MARKER

__all__ = ["DEFAULT_FORBIDDEN", "SecurityPolicy"]

# Files other programs execute or trust, and toolkeeper's own state: never read or written by a
# tool, at any depth, whether they exist yet or not. ``.git`` anywhere (a repository's directory
# or a ``gitdir:`` file) decides which configuration git reads (``commondir``, ``config.worktree``,
# ``info/attributes``, hooks): a repository is reached only through ``git_operations``. ``HEAD``
# anywhere: a folder holding ``HEAD``, ``objects/`` and ``refs/`` is a bare repository to git,
# whose ``config`` (a pager, an alias, hooks) runs when a person uses git in it. Editors' and
# agents' project settings (``.vscode``, ``.cursor``, ``.claude``, ``.gemini``, ``.zed``) start
# programs when the folder is opened; ``.envrc`` and mise's files when a shell enters it;
# ``.hg`` holds Mercurial's hooks; ``.devcontainer`` runs commands when the folder is reopened in
# a container; ``.npmrc`` and ``.yarnrc*`` choose what npm and yarn run.
DEFAULT_FORBIDDEN: tuple[str, ...] = (
    ".git", ".git/config", ".git/hooks", ".git/hooks/*", ".gitmodules", ".gitconfig", "HEAD",
    ".bashrc", ".bash_profile", ".bash_login", ".profile", ".zshrc", ".zprofile", ".zshenv",
    ".bash_logout", ".inputrc", ".ripgreprc", ".mcp.json", ".vscode", ".vscode/*", ".idea",
    ".idea/*", ".claude/*", ".cursor", ".gemini", ".zed", ".devcontainer", ".hg", ".envrc",
    ".mise.toml", ".mise.*.toml", "mise.toml", "mise.*.toml", ".mise", "mise/config.toml",
    ".config/mise", ".config/mise.toml", ".npmrc", ".yarnrc", ".yarnrc.yml", "toolkeeper.toml",
    "toolkeeper.db", "toolkeeper.db-*", "tool_descriptions/*", "*.cedar", STATE_MARKER,
)
DEFAULT_ENV = ("PATH", "HOME", "TERM", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
DEFAULT_COMMANDS = ("ls", "cat", "head", "tail", "wc", "grep", "rg", "sort", "uniq", "cut", "tr",
                    "echo", "pwd", "date", "diff", "mkdir", "touch", "cp", "mv", "stat", "du",
                    "basename", "dirname", "true", "false", "test", "[", "printf", "seq", "nl",
                    "sed", "awk", "md5sum", "sha256sum", "file", "tee")


class _Rule:
    """One forbidden-path pattern, compiled once: its glob as a regular expression, the
    literal text a match must start with, and the prefix a path under it starts with."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.glob = re.compile(fnmatch.translate(pattern))
        wild = next((i for i, c in enumerate(pattern) if c in "*?["), len(pattern))
        self.literal = pattern[:wild]
        self.free = pattern.startswith("*")
        """A leading ``*`` takes in any text before it, ``/`` included: if the glob matches
        from some component on, it matches the whole path too."""
        self.under = None if pattern.endswith("*") else pattern.rstrip("*") + "/"

    def matches(self, path: str, starts: list[int]) -> bool:
        if self.free and self.glob.match(path):
            return True
        for start in starts:
            if self.under is not None and path.startswith(self.under, start):
                return True
            if not self.free and path.startswith(self.literal, start) \
                    and self.glob.match(path, start):
                return True
        return False


@functools.lru_cache(maxsize=64)
def _rules(patterns: tuple[str, ...]) -> tuple[_Rule, ...]:
    return tuple(_Rule(pattern) for pattern in patterns)


class SecurityPolicy(BaseModel):
    """The rules every built-in tool enforces.

    Attributes:
        workspace: The only directory tools may touch (read-write unless ``read_only``).
        read_only_roots: Extra directories tools may read.
        autonomy: ``read_only`` (no writes, no commands), ``supervised`` (writes and commands
            need approval), ``full``.
        allowed_commands: Programs ``shell`` may run (every command of a command line counts).
        forbidden_paths: Workspace-relative globs never read or written (existing or not).
        env_passthrough: Environment variables passed to commands besides the safe defaults.
        max_output_bytes: Output cap of commands and reads (1 MiB).
        max_file_bytes: Largest file read or written.
        shell_timeout_s: Wall-clock limit of one command.
        max_memory_bytes: Memory of one command with everything it starts (a per-call cgroup
            where the host allows one, else the address space of each process).
        network: Whether commands may use the network (no by default).
        allowed_domains: Domains the web tools may reach (label-boundary match).
        allow_unconfined: Run commands without a sandbox when none is available (every call
            then needs approval).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    workspace: Path
    read_only: bool = False
    read_only_roots: tuple[Path, ...] = ()
    autonomy: Literal["read_only", "supervised", "full"] = "supervised"
    allowed_commands: tuple[str, ...] = DEFAULT_COMMANDS
    forbidden_paths: tuple[str, ...] = DEFAULT_FORBIDDEN
    env_passthrough: tuple[str, ...] = ()
    max_output_bytes: int = Field(default=1 << 20, gt=0)
    max_file_bytes: int = Field(default=10 << 20, gt=0)
    shell_timeout_s: float = Field(default=60.0, gt=0)
    max_memory_bytes: int = Field(default=2 << 30, gt=0)
    network: bool = False
    allowed_domains: tuple[str, ...] = ()
    allow_loopback_http: bool = False
    """Let http tools reach 127.0.0.1 and ::1 (for tests and local services only)."""
    allowed_domains_key: str = "security.allowed_domains"
    """The setting ``allowed_domains`` came from, named when a domain is refused."""
    hosts: tuple[tuple[str, str], ...] = ()
    """Names pinned to addresses, like ``/etc/hosts``, for the web tools (the address rules
    still apply to the pinned address); a mapping is accepted."""
    allow_unconfined: bool = False

    @field_validator("hosts", mode="before")
    @classmethod
    def _pairs(cls, value: object) -> object:
        if isinstance(value, Mapping):
            return tuple(sorted((str(k).lower().rstrip("."), str(v)) for k, v in value.items()))
        return value

    @field_validator("workspace")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    def require_workspace(self, where: str = "SecurityPolicy") -> None:
        """Raise ``ConfigError`` unless the workspace is a directory; ``where`` names the
        setting (``toolkeeper.toml:3`` for a file)."""
        if not self.workspace.is_dir():
            state = "is not a directory" if self.workspace.exists() else "does not exist"
            raise ConfigError(f"{where}: security.workspace: {str(self.workspace)!r} {state}; "
                              "create it, or set workspace to a directory that exists")

    def protected_paths(self) -> tuple[str, ...]:
        """Workspace-root paths the sandbox must not change: the forbidden paths without
        wildcards, and the directories of those that end in ``/*``."""
        out: list[str] = []
        for pattern in self.forbidden_paths:
            base = pattern[:-2] if pattern.endswith("/*") else pattern
            if not any(c in base for c in "*?[") and base not in out:
                out.append(base)
        return tuple(out)

    @property
    def env_allowlist(self) -> tuple[str, ...]:
        return (*DEFAULT_ENV, *self.env_passthrough)

    def forbidden_rule(self, relative: str) -> str | None:
        """The forbidden-path pattern ``relative`` matches (at any depth), if any: one whose
        glob matches the path from one of its components on (``*`` crosses ``/``), or, for a
        pattern not ending in ``*``, one the path lies under (``.git`` covers ``.git/x``).

        Matched in place at each component's start (``_Rule``), so a long hostile path costs
        a few passes over it, not one per component."""
        starts = [0, *(i + 1 for i, c in enumerate(relative) if c == "/")]
        for rule in _rules(self.forbidden_paths):
            if rule.matches(relative, starts):
                return rule.pattern
        return None

    def check_path(self, relative: str, *, write: bool, tool: str) -> None:
        """Refuse a forbidden path, or any write under a read-only policy."""
        rule = self.forbidden_rule(relative)
        if rule is not None:
            hint = (" (a repository is reached through git_operations)"
                    if rule.split("/")[0] == ".git" else "")
            raise PolicyViolationError(
                f"'{relative}' is protected by the forbidden-path rule {rule!r}; tools never "
                f"touch it{hint}. To allow it, remove the rule from security.forbidden_paths",
                tool_name=tool, details={"rule": "forbidden_paths", "pattern": rule})
        if write and relative.rsplit("/", 1)[-1] in STATE_FILES:  # the file tools write files
            raise PolicyViolationError(
                f"writing '{relative}' is refused: a file of that name marks its folder as "
                f"toolkeeper state, which no tool reads or writes (rule {STATE_RULE}); choose "
                "another name", tool_name=tool, details={"rule": STATE_RULE})
        if write and (self.read_only or self.autonomy == "read_only"):
            raise PolicyViolationError(
                f"writing '{relative}' is refused: the workspace is read-only (rule "
                "security.autonomy = 'read_only'); set autonomy to 'supervised' or 'full' to "
                "allow writes", tool_name=tool, details={"rule": "autonomy"})
