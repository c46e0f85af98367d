"""TOML configuration and config gating: which tools exist, and why."""

from .gating import Decision, all_tools_with_runtime, explain, policy_from
from .model import ToolkeeperConfig, load_config

__all__ = ["Decision", "ToolkeeperConfig", "all_tools_with_runtime", "explain", "load_config",
           "policy_from"]
