"""The built-in tools described as data: name, family, the key that decides them, what they
need (an ``enabled`` flag, credentials, a sandbox) and whether they write. Gating and
``toolkeeper tools explain`` read these values; nothing parses prose."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from ..builtins.browser import playwright_missing
from .model import ToolkeeperConfig

__all__ = ["BUILTINS", "Builtin", "Family"]

Family = Literal["shell", "files", "search", "code_search", "calculator", "git", "http", "skills",
                 "web_search", "text_browser", "browser"]


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
        needs: What else it needs, checked after the flag: the reason it cannot run, or
            ``None`` (a missing extra, a program, a setting without which it would be useless).
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
    needs: Callable[[ToolkeeperConfig], str | None] | None = None


def _skills_needs(config: ToolkeeperConfig) -> str | None:
    folder = config.skills.dir
    if folder is None:
        return "skills.dir is not set; read_skill reads the skills in that folder"
    if not folder.is_dir():
        return f"skills.dir {folder} is not a folder; create it or point skills.dir at one"
    return None


def _browser_needs(config: ToolkeeperConfig) -> str | None:
    if not config.browser.allowed_domains:
        return ("browser.allowed_domains is empty; list the domains the browser may open "
                '(e.g. allowed_domains = ["docs.example.com"])')
    executable = config.browser.executable_path
    if not executable.is_file():
        return (f"no Chromium at {executable}; install it (Debian: apt install chromium) or set "
                "browser.executable_path")
    return playwright_missing()


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
    Builtin(name="web_search_tool", family="web_search", key="web_search.enabled",
            enabled=lambda c: c.web_search.enabled,
            credentials=[("web_search.api_key", "BRAVE_API_KEY")]),
    Builtin(name="text_browser", family="text_browser", key="text_browser.enabled",
            enabled=lambda c: c.text_browser.enabled),
    Builtin(name="browser", family="browser", key="browser.enabled",
            enabled=lambda c: c.browser.enabled, needs=_browser_needs, writes=True),
    Builtin(name="browser_open", family="browser", key="browser.enabled",
            enabled=lambda c: c.browser.enabled, needs=_browser_needs),
    Builtin(name="read_skill", family="skills", key="skills.prompt_injection_mode",
            enabled=lambda c: c.skills.prompt_injection_mode == "compact",
            needs=_skills_needs),
)
