"""The built-in tools described as data: name, family, the key that decides them, what they
need (an ``enabled`` flag, credentials, a sandbox) and whether they write. Gating and
``toolkeeper tools explain`` read these values; nothing parses prose."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from .model import ToolkeeperConfig

__all__ = ["BUILTINS", "Builtin", "Family"]

Family = Literal["shell", "files", "search", "code_search", "calculator", "git", "http", "skills"]


@dataclass(frozen=True, kw_only=True)
class Builtin:
    """One built-in tool.

    Attributes:
        name: The name it is offered under.
        family: The factory that makes it (with its siblings).
        made_as: Its name in the family, when it is offered under another (``web_fetch``).
        key: The config key that decides it (``(core)`` for always-on tools).
        enabled: The gate of an optional tool; ``None`` for always-on.
        credentials: (config key, environment variable) pairs, one of each must be set.
        needs_sandbox: It runs programs, so it needs a sandbox.
        unconfined_ok: Without a sandbox it may still run when ``security.allow_unconfined``
            (then every call needs approval).
        writes: It changes the workspace or the world: absent under ``autonomy = "read_only"``.
    """

    name: str
    family: Family
    made_as: str | None = None
    key: str = "(core)"
    enabled: Callable[[ToolkeeperConfig], bool] | None = None
    credentials: Sequence[tuple[str, str]] = ()
    needs_sandbox: bool = False
    unconfined_ok: bool = False
    writes: bool = False


BUILTINS: tuple[Builtin, ...] = (
    Builtin(name="shell", family="shell", key="security.allow_unconfined", needs_sandbox=True,
            unconfined_ok=True, writes=True),
    Builtin(name="file_read", family="files"),
    Builtin(name="file_write", family="files", writes=True),
    Builtin(name="file_edit", family="files", writes=True),
    Builtin(name="glob_search", family="search"),
    Builtin(name="content_search", family="search"),
    Builtin(name="semantic_code_search", family="code_search"),
    Builtin(name="calculator", family="calculator"),
    Builtin(name="git_operations", family="git", needs_sandbox=True),
    Builtin(name="web_fetch", family="http", made_as="http_fetch", key="web_fetch.enabled",
            enabled=lambda c: c.web_fetch.enabled),
    Builtin(name="http_request", family="http", key="http_request.enabled",
            enabled=lambda c: c.http_request.enabled, writes=True),
    Builtin(name="read_skill", family="skills", key="skills.prompt_injection_mode",
            enabled=lambda c: c.skills.prompt_injection_mode == "compact"
            and c.skills.dir is not None),
)
