"""Tools an agent runtime's config may ask for that toolkeeper does not ship, as data: the name, the section
that would ask for it, and why it is not here. ``toolkeeper tools explain`` lists every one of
them ("not provided by toolkeeper"), with the section's file:line when the config has it, so a
section written for another runtime is accepted, and never silently ignored."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NOT_PROVIDED", "NotProvided"]

_RUNTIME = "needs an agent runtime"
_SCHEDULER = (f"{_RUNTIME} that keeps running and wakes the agent on a schedule; toolkeeper "
              "is a tool layer with no scheduler")
_MODEL = f"{_RUNTIME} that talks to models; toolkeeper never calls a model"
_SERVICE = ("a third-party service integration with its own credentials; serve that service's "
            "MCP server through [[mcp.servers]] instead")
_AGENTS = f"{_RUNTIME} that runs other agents; toolkeeper does not run agents"


@dataclass(frozen=True, kw_only=True)
class NotProvided:
    """One tool a runtime's config may ask for and toolkeeper does not ship.

    Attributes:
        name: Its name in that runtime (``sop_*`` for a family).
        section: The top-level config section that would ask for it; ``None`` for the
            runtime's always-on core.
        key: The key the runtime gates it by (``notion.enabled``, ``agents``, ``sop.sops_dir``).
        reason: Why toolkeeper does not ship it.
    """

    name: str
    section: str | None = None
    key: str = "(agent runtime)"
    reason: str


NOT_PROVIDED: tuple[NotProvided, ...] = (
    *(NotProvided(name=name, reason=_SCHEDULER) for name in (
        "cron_add", "cron_list", "cron_remove", "cron_update", "cron_run", "cron_runs",
        "schedule")),
    NotProvided(name="pushover", reason=f"{_RUNTIME}'s notification channel (a Pushover "
                "account); toolkeeper sends no notifications"),
    NotProvided(name="weather", reason=_SERVICE),
    NotProvided(name="canvas", reason=f"{_RUNTIME}'s user interface to draw on; toolkeeper "
                "has none"),
    NotProvided(name="model_routing_config", reason=_MODEL),
    NotProvided(name="model_switch", reason=_MODEL),
    NotProvided(name="llm_task", reason=_MODEL),
    NotProvided(name="proxy_config", reason=f"{_RUNTIME}'s outbound proxy; toolkeeper's web "
                "tools ignore proxies on purpose (each request goes to the address it checked)"),
    NotProvided(name="browser_delegate", section="browser_delegate",
                key="browser_delegate.enabled", reason="hands browsing to an external coding "
                "agent through the shell; toolkeeper ships browser and browser_open instead"),
    NotProvided(name="notion", section="notion", key="notion.enabled", reason=_SERVICE),
    NotProvided(name="jira", section="jira", key="jira.enabled", reason=_SERVICE),
    NotProvided(name="linkedin", section="linkedin", key="linkedin.enabled", reason=_SERVICE),
    NotProvided(name="cloud_ops", section="cloud_ops", key="cloud_ops.enabled",
                reason=f"{_RUNTIME}'s cloud accounts; serve a cloud provider's MCP server "
                "through [[mcp.servers]] instead"),
    NotProvided(name="cloud_patterns", section="cloud_ops", key="cloud_ops.enabled",
                reason=f"{_RUNTIME}'s cloud accounts; serve a cloud provider's MCP server "
                "through [[mcp.servers]] instead"),
    NotProvided(name="sop_*", section="sop", key="sop.sops_dir",
                reason=f"{_RUNTIME}'s workflow engine (standard operating procedures); "
                "toolkeeper's skills ([skills]) give a model written procedures to follow"),
    NotProvided(name="delegate", section="agents", key="agents.<name>", reason=_AGENTS),
    NotProvided(name="swarm", section="swarms", key="swarms.<name>", reason=_AGENTS),
)
