"""The catalog and the door ``toolkeeper serve`` serves: the tools (TARGETS, the built-ins the
config describes, code mode), the policy every call runs under, and the stores approvals and
audit rows live in. Built from the settings alone, so any command that must judge calls as
serve does builds the same door."""

from __future__ import annotations

import math
from collections.abc import Iterable

from ..approval.persisted import PersistedApprovalHandler
from ..approval.pg import is_url
from ..approval.store import PostgresApprovalStore, SqliteApprovalStore
from ..artifacts.store import BlobStore
from ..builtins import SecurityPolicy, default_tools
from ..codemode import ToolChainTool
from ..config import ToolkeeperConfig, all_tools_with_runtime, chain_policy, policy_from
from ..hooks import HookManager
from ..i18n import localized_tools
from ..invoke.audit import PostgresAuditLog, SqliteAuditLog
from ..invoke.invoker import ToolInvoker
from ..invoke.policy import ChainPolicy
from ..policy import Policies, PolicyStore
from ..toolbox.toolbox import Toolbox
from .loader import load_tools
from .serve_listen import report_lines
from .serve_settings import SERVER_POLICY, ServeSettings

__all__ = ["build_door", "govern"]


def build_door(settings: ServeSettings, *, page_url: str | None = None,
               artifacts: BlobStore | None = None) -> ToolInvoker:
    """The served tools and the door: with a config, its built-ins (gated, explained) and its
    autonomy; without one, the minimal built-ins over the workspace, supervised.

    Args:
        settings: What serve serves with.
        page_url: Where a person decides (the approval page), named by a waiting call's
            messages; ``None``: the command that decides from a terminal.
        artifacts: Where results above the inline limit are offloaded.
    """
    config = settings.config
    box = Toolbox(_tools(settings))
    store, audit = _stores(settings)
    handler = PersistedApprovalHandler(store, wait_s=math.inf, poll_s=0.05)
    invoker = ToolInvoker(box, handler, policy=_policy(settings), audit=audit,
                          hooks=HookManager(), artifact_store=artifacts, page_url=page_url,
                          policies=_policies(settings, box))
    if config is not None and config.codemode.enabled:
        chain = _code_mode(invoker, config)
        box.add(chain)
        if chain.blocked is None:  # else each run says why no script can run
            chain.warm_up()  # the first run's start is as fast as the next ones'
    return invoker


def govern(invoker: ToolInvoker, awaiting: Iterable[str] = ()) -> None:
    """Read and check the policies against the whole catalog (code mode's tool included),
    then keep watching the files and the stored rules (``Policies.close`` stops it). A policy
    naming a tool of one of the upstream MCP servers ``awaiting`` (``NAME-…``) is checked once
    that server's tools are listed (``Policies.listed``).

    Raises:
        ConfigError: a policy that does not parse, or names what does not exist.
        MissingExtraError: Cedar policies without the ``policy`` extra.
    """
    if invoker.policies is not None:
        invoker.policies.awaiting = frozenset(awaiting)
        invoker.policies.load()
        invoker.policies.watch()


def _policies(settings: ServeSettings, box: Toolbox) -> Policies:
    """The Cedar policies of ``[policy]`` (its directory, its default set) and the rules in
    the store, over the served catalog."""
    config = settings.config
    return Policies(box, directory=config.policy_dir() if config is not None else None,
                    store=PolicyStore(settings.db),
                    defaults=config.policy.defaults if config is not None else True,
                    workspace=settings.workspace, report=lambda line: report_lines([line]))


def _tools(settings: ServeSettings) -> list[object]:
    """TARGETS' tools, then the built-ins (unless ``--no-builtins``) in the config's locale."""
    tools: list[object] = [t for target in settings.flags.targets for t in load_tools(target)]
    if settings.flags.no_builtins:
        return tools
    workspace, config = settings.workspace, settings.config
    if config is not None:
        return tools + localized_tools(all_tools_with_runtime(config), config.locale,
                                       workspace=workspace)
    return tools + localized_tools(default_tools(SecurityPolicy(workspace=workspace)),
                                   workspace=workspace)


def _policy(settings: ServeSettings) -> ChainPolicy:
    """The server's policy: the config's autonomy (its built-ins served), ``--approval-wait``
    as every call's wait (a session's and a code-mode run's too: the handler keeps none of its
    own), ``--approval-ttl``, and the config's audit bound."""
    config = settings.config
    policy = SERVER_POLICY
    if config is not None and not settings.flags.no_builtins:
        policy = chain_policy(config, SERVER_POLICY)
    policy = policy.model_copy(update={"approval_ttl_s": settings.flags.approval_ttl,
                                       "approval_timeout_s": settings.flags.approval_wait})
    if config is not None:
        policy = policy.model_copy(update={"max_audit_rows": config.security.max_audit_rows,
                                           "approval_ttl_tools": config.approval.ttl})
    return policy


def _stores(settings: ServeSettings
            ) -> tuple[SqliteApprovalStore, SqliteAuditLog | PostgresAuditLog]:
    db = settings.db
    if is_url(db):
        return PostgresApprovalStore(str(db)), PostgresAuditLog(str(db))
    return SqliteApprovalStore(db), SqliteAuditLog(db)


def _code_mode(invoker: ToolInvoker, config: ToolkeeperConfig) -> ToolChainTool:
    """``tool_chain`` as ``[codemode]`` says: its own budget and total time; every call of a
    script passes this invoker (approval, audit) like a direct one."""
    section = config.codemode
    policy = invoker.policy.model_copy(update={"max_tool_calls": section.max_tool_calls,
                                               "total_timeout_s": section.total_timeout_s})
    workspace = config.security.workspace if section.workspace != "none" else None
    return ToolChainTool(invoker, tools=section.tools, policy=policy, workspace=workspace,
                         writable=section.workspace == "write", warm=section.warm_sandboxes,
                         security=policy_from(config),  # the file tools' protected paths
                         max_runs=section.max_runs,
                         max_runs_per_client=section.max_runs_per_client)
