"""Which tools exist, and why: the minimal and the full registry, gated by the config.

Every decision — included or excluded — carries its cause as a value, the reason in words and
the config key (and file:line) that decided it, so ``toolkeeper tools explain`` can answer "why
is this tool (not) here?" and nothing has to read the words back.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from ..builtins import SecurityPolicy
from ..builtins.browser import browser_tools
from ..builtins.calculator import calculator_tool
from ..builtins.code_search import code_search_tool
from ..builtins.files import file_tools
from ..builtins.git import git_tool
from ..builtins.http import http_tools
from ..builtins.policy import DEFAULT_COMMANDS, DEFAULT_FORBIDDEN
from ..builtins.search import search_tools
from ..builtins.shell import sandbox_blocker, shell_tool
from ..builtins.text_browser import text_browser_tool
from ..builtins.web_search import web_search_tool
from ..invoke.policy import ChainPolicy
from ..sandbox import probe
from ..skills import load_skills, read_skill_tool
from ..tools.tool import Tool
from .absent import NOT_PROVIDED, NotProvided
from .builtins_table import BUILTINS, Builtin, Family
from .model import ToolkeeperConfig

__all__ = ["Cause", "Decision", "all_tools_with_runtime", "chain_policy", "explain",
           "policy_from"]

log = logging.getLogger("toolkeeper.config")

Cause = Literal["core", "enabled", "confined", "unconfined", "not_enabled",
                "missing_credentials", "no_sandbox", "unavailable", "read_only", "not_provided"]
_ASKED_FOR = ("missing_credentials", "no_sandbox", "unavailable")
"""Causes of tools that were asked for but left out: logged as warnings."""


@dataclass(frozen=True, kw_only=True)
class Decision:
    """One tool's fate: included or not, the cause, why in words, and which key in which file
    decided it."""

    tool: str
    included: bool
    cause: Cause
    reason: str
    key: str
    source: str


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


def decide(config: ToolkeeperConfig, builtin: Builtin, blocker: str | None) -> Decision:
    """One built-in's decision. ``blocker`` says why no sandbox can run (``None``: one can)."""
    def out(included: bool, cause: Cause, reason: str) -> Decision:
        return Decision(tool=builtin.name, included=included, cause=cause, reason=reason,
                        key=builtin.key, source=source)

    source = config.source(builtin.key) if builtin.key != "(core)" else "built-in"
    if builtin.enabled is not None and not builtin.enabled(config):
        return out(False, "not_enabled", f"{builtin.key} is not set to enable it")
    missing = _credential_missing(config, builtin.credentials)
    if missing:
        return out(False, "missing_credentials", f"enabled, but {missing}")
    unavailable = builtin.needs(config) if builtin.needs is not None else None
    if unavailable:
        return out(False, "unavailable", f"enabled, but {unavailable}")
    if builtin.writes and config.security.autonomy == "read_only":
        return Decision(tool=builtin.name, included=False, cause="read_only",
                        key="security.autonomy", source=config.source("security.autonomy"),
                        reason="security.autonomy = 'read_only' leaves out tools that write")
    if builtin.needs_sandbox and blocker is not None:
        if builtin.unconfined_ok and config.security.allow_unconfined:
            return out(True, "unconfined", "explicitly unconfined: every call needs approval")
        return out(False, "no_sandbox", f"needs a sandbox that cannot run: {blocker}; fix that "
                   "or set security.allow_unconfined = true" if builtin.unconfined_ok else
                   f"runs only in a sandbox, which cannot run: {blocker}")
    if builtin.needs_sandbox:
        return out(True, "confined", f"always on, confined by {probe().backend}")
    if builtin.enabled is not None:
        return out(True, "enabled", f"{builtin.key} = true")
    return out(True, "core", "always on (the minimal registry)")


def _builtin_decisions(config: ToolkeeperConfig) -> list[Decision]:
    blocker = sandbox_blocker(policy_from(config))
    return [decide(config, builtin, blocker) for builtin in BUILTINS]


def _not_provided(config: ToolkeeperConfig, absent: NotProvided) -> Decision:
    where = config.section_source(absent.section) if absent.section else None
    return Decision(tool=absent.name, included=False, cause="not_provided", key=absent.key,
                    reason=f"not provided by toolkeeper: {absent.reason}",
                    source=where or ("always on in an agent runtime" if absent.section is None
                                     else "not in the config"))


def _autonomy_not_applied(config: ToolkeeperConfig) -> list[Decision]:
    """Keys of ``[autonomy]`` that have no counterpart in ``[security]``."""
    return [Decision(tool=f"autonomy.{key}", included=False, cause="not_provided",
                     key=f"autonomy.{key}", source=config.source(f"autonomy.{key}"),
                     reason="not applied by toolkeeper: of [autonomy], only level, "
                     "allowed_commands and forbidden_paths are read (into [security])")
            for key in sorted(config.autonomy.model_extra or {})]


def explain(config: ToolkeeperConfig) -> list[Decision]:
    """Every known built-in tool, included or excluded, with the cause and the deciding key;
    then every tool an agent runtime's config may ask for that toolkeeper does not provide
    (with the section of the config that asks for it, when it does), and any ``[autonomy]``
    key not applied."""
    return [*_builtin_decisions(config), *(_not_provided(config, a) for a in NOT_PROVIDED),
            *_autonomy_not_applied(config)]


def _changed(policy: SecurityPolicy, **changes: object) -> SecurityPolicy:
    """``policy`` with some rules changed, validated like the original."""
    return SecurityPolicy.model_validate({**policy.model_dump(), **changes})


def _text_browser_policy(policy: SecurityPolicy, config: ToolkeeperConfig) -> SecurityPolicy:
    """``[text_browser] allowed_domains`` when given, else the fetch tools' allowlist."""
    own = config.text_browser.allowed_domains
    return _changed(policy, allowed_domains=own, allowed_domains_key="text_browser.allowed_domains"
                    ) if own else policy


def _family(family: Family, policy: SecurityPolicy, config: ToolkeeperConfig) -> list[Tool]:
    makers: dict[Family, Callable[[], list[Tool]]] = {
        "shell": lambda: [shell_tool(policy)],
        "files": lambda: file_tools(policy),
        "search": lambda: search_tools(policy),
        "code_search": lambda: [code_search_tool(policy)],
        "calculator": lambda: [calculator_tool()],
        "git": lambda: [git_tool(policy)],
        "http": lambda: http_tools(policy),
        "skills": lambda: [read_skill_tool(load_skills(config.skills.dir))]
        if config.skills.dir is not None else [],
        "web_search": lambda: [web_search_tool(
            api_key=config.web_search.api_key or os.environ.get("BRAVE_API_KEY", ""),
            base_url=config.web_search.base_url, max_results=config.web_search.max_results,
            timeout_s=config.web_search.timeout_secs)],
        "text_browser": lambda: [text_browser_tool(_text_browser_policy(policy, config))],
        "browser": lambda: browser_tools(
            _changed(policy, allowed_domains=config.browser.allowed_domains,
                     allowed_domains_key="browser.allowed_domains", hosts=config.browser.hosts,
                     allow_loopback_http=config.browser.allow_loopback),
            executable_path=config.browser.executable_path,
            timeout_s=config.browser.timeout_secs),
    }
    return makers[family]()


def all_tools_with_runtime(config: ToolkeeperConfig) -> list[Tool]:
    """The full registry: the always-on core plus every optional tool whose gate passes.

    Excluded tools that were asked for (enabled but missing credentials or a sandbox) are logged
    as warnings naming what is missing.
    """
    policy = policy_from(config)
    policy.require_workspace(config.source("security.workspace"))
    made: dict[Family, dict[str, Tool]] = {}
    tools: list[Tool] = []
    for absent in NOT_PROVIDED:
        if absent.section is not None and absent.section in config.present:
            log.warning("tool %s not provided by toolkeeper: %s (%s)", absent.name,
                        absent.reason, config.section_source(absent.section))
    for builtin, decision in zip(BUILTINS, _builtin_decisions(config), strict=True):
        if not decision.included:
            if decision.cause in _ASKED_FOR:
                log.warning("tool %s left out: %s (%s)", decision.tool, decision.reason,
                            decision.source)
            continue
        if builtin.family not in made:
            made[builtin.family] = {t.name: t for t in _family(builtin.family, policy, config)}
        tool = made[builtin.family].get(builtin.made_as or builtin.name)
        if tool is not None:
            tools.append(tool if builtin.made_as is None else _renamed(tool, builtin))
    return tools


def _renamed(tool: Tool, builtin: Builtin) -> Tool:
    """The tool under the name a runtime's config gives it, its family's name kept as an alias
    (``web_fetch``, also reached as ``http_fetch``)."""
    aliases = (*tool.metadata.aliases, tool.name)
    return tool.replace(name=builtin.name,
                        metadata=tool.metadata.model_copy(update={"aliases": aliases}))


def chain_policy(config: ToolkeeperConfig, base: ChainPolicy | None = None) -> ChainPolicy:
    """The invoker's policy for this config: under ``autonomy = "full"`` the included
    built-ins run without approval; under ``supervised`` (the default) the risky ones wait for
    it; under ``read_only`` the tools that write are not there at all."""
    base = base or ChainPolicy()
    if config.security.autonomy != "full":
        return base
    names = frozenset(d.tool for d in explain(config) if d.included)
    return base.model_copy(update={"unapproved_tools": base.unapproved_tools | names})
