"""Which tools exist, and why: seed 004's minimal and full registries with config gates.

Every decision — included or excluded — carries the reason and the config key (and file:line)
that decided it, so ``toolkeeper tools explain`` can answer "why is this tool (not) here?".
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..builtins import SecurityPolicy
from ..builtins.calculator import calculator_tool
from ..builtins.code_search import code_search_tool
from ..builtins.files import file_tools
from ..builtins.git import git_tool
from ..builtins.http import http_tools
from ..builtins.policy import DEFAULT_COMMANDS, DEFAULT_FORBIDDEN
from ..builtins.search import search_tools
from ..builtins.shell import sandbox_blocker, shell_tool
from ..sandbox import probe
from ..skills import load_skills, read_skill_tool
from ..tools.tool import Tool
from .model import ToolkeeperConfig

__all__ = ["Decision", "all_tools_with_runtime", "explain", "policy_from"]

log = logging.getLogger("toolkeeper.config")


@dataclass(frozen=True, kw_only=True)
class Decision:
    """One tool's fate: included or not, why, and which key in which file decided it."""

    tool: str
    included: bool
    reason: str
    key: str
    source: str


@dataclass(frozen=True, kw_only=True)
class Requirement:
    """A gate for an optional tool: an ``enabled`` flag, credentials, a runtime capability,
    or the presence of a section."""

    tool: str
    key: str
    enabled: Callable[[ToolkeeperConfig], bool]
    credentials: Sequence[tuple[str, str]] = ()
    """(config key, environment variable) pairs; one of each pair must be set."""
    needs_sandbox: bool = False


def policy_from(config: ToolkeeperConfig) -> SecurityPolicy:
    """The ``SecurityPolicy`` the configuration describes."""
    security = config.security
    forbidden = tuple(security.forbidden_paths) if security.forbidden_paths is not None \
        else DEFAULT_FORBIDDEN
    return SecurityPolicy(
        workspace=security.workspace, autonomy=security.autonomy,
        allowed_commands=tuple(security.allowed_commands or DEFAULT_COMMANDS),
        forbidden_paths=(*forbidden, *security.extra_forbidden_paths),
        env_passthrough=tuple(security.shell_env_passthrough),
        max_output_bytes=security.max_output_bytes, shell_timeout_s=config.shell_tool.timeout_secs,
        max_memory_bytes=security.max_memory_mb << 20,
        network=security.network,
        allowed_domains=tuple(security.allowed_domains or config.web_fetch.allowed_domains
                              or config.http_request.allowed_domains),
        allow_unconfined=security.allow_unconfined)


def _credential_missing(config: ToolkeeperConfig, pairs: Sequence[tuple[str, str]]) -> str | None:
    for key, env in pairs:
        section, _, leaf = key.partition(".")
        value = getattr(getattr(config, section, None), leaf, None)
        if not value and not os.environ.get(env):
            return f"needs {key} in the config or the {env} environment variable"
    return None


def _decide(config: ToolkeeperConfig, requirement: Requirement, sandbox_ok: bool
            ) -> Decision:
    source = config.source(requirement.key)
    if not requirement.enabled(config):
        return Decision(tool=requirement.tool, included=False, key=requirement.key, source=source,
                        reason=f"{requirement.key} is not set to enable it")
    missing = _credential_missing(config, requirement.credentials)
    if missing:
        return Decision(tool=requirement.tool, included=False, key=requirement.key, source=source,
                        reason=f"enabled, but {missing}")
    if requirement.needs_sandbox and not sandbox_ok:
        return Decision(tool=requirement.tool, included=False, key=requirement.key, source=source,
                        reason=f"enabled, but needs a sandbox and none is available "
                               f"({probe().detail})")
    return Decision(tool=requirement.tool, included=True, key=requirement.key, source=source,
                    reason=f"{requirement.key} = true")


OPTIONAL = (
    Requirement(tool="web_fetch", key="web_fetch.enabled", enabled=lambda c: c.web_fetch.enabled),
    Requirement(tool="http_request", key="http_request.enabled",
                enabled=lambda c: c.http_request.enabled),
    Requirement(tool="read_skill", key="skills.prompt_injection_mode",
                enabled=lambda c: c.skills.prompt_injection_mode == "compact"
                and c.skills.dir is not None),
)


def explain(config: ToolkeeperConfig) -> list[Decision]:
    """Every known tool, included or excluded, with the reason and the deciding key."""
    blocker = sandbox_blocker(policy_from(config))
    sandbox_ok = blocker is None or config.security.allow_unconfined
    core = [(name, "always on (the minimal registry)") for name in (
        "file_read", "file_write", "file_edit", "glob_search", "content_search",
        "semantic_code_search", "calculator")]
    decisions = [Decision(tool=name, included=True, reason=reason, key="(core)", source="built-in")
                 for name, reason in core]
    shell_ok = Decision(tool="shell", included=sandbox_ok, key="security.allow_unconfined",
                        source=config.source("security.allow_unconfined"),
                        reason=(f"always on, confined by {probe().backend}" if blocker is None else
                                "explicitly unconfined: every call needs approval"
                                if config.security.allow_unconfined else
                                f"needs a sandbox that cannot run: {blocker}; fix that or set "
                                "security.allow_unconfined = true"))
    decisions.insert(0, shell_ok)
    decisions.append(Decision(
        tool="git_operations", included=blocker is None, key="(core)", source="built-in",
        reason="always on, in the sandbox" if blocker is None else
        f"runs only in the sandbox, which cannot run: {blocker}"))
    decisions += [_decide(config, r, sandbox_ok) for r in OPTIONAL]
    return decisions


def all_tools_with_runtime(config: ToolkeeperConfig) -> list[Tool]:
    """The full registry: the always-on core plus every optional tool whose gate passes.

    Excluded tools that were asked for (enabled but missing credentials or a sandbox) are logged
    as warnings naming what is missing.
    """
    policy = policy_from(config)
    decisions = {d.tool: d for d in explain(config)}
    for decision in decisions.values():
        if not decision.included and decision.reason.startswith(("enabled, but", "needs a")):
            log.warning("tool %s left out: %s (%s)", decision.tool, decision.reason,
                        decision.source)
    tools: list[Any] = [shell_tool(policy)] if decisions["shell"].included else []
    tools += [*file_tools(policy), *search_tools(policy), code_search_tool(policy)]
    tools.append(calculator_tool())
    if decisions["git_operations"].included:
        tools.append(git_tool(policy))
    fetch, request = http_tools(policy)
    if decisions["web_fetch"].included:
        tools.append(fetch.replace(name="web_fetch"))
    if decisions["http_request"].included:
        tools.append(request)
    if decisions["read_skill"].included and config.skills.dir is not None:
        tools.append(read_skill_tool(load_skills(config.skills.dir)))
    return tools
