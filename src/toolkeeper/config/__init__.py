"""TOML configuration and config gating: which tools exist, and why."""

from .builtins_table import BUILTINS, Builtin
from .gating import Cause, Decision, all_tools_with_runtime, chain_policy, explain, policy_from
from .model import MCPSection, MCPServerConfig, ToolkeeperConfig, load_config

__all__ = ["BUILTINS", "Builtin", "Cause", "Decision", "MCPSection", "MCPServerConfig",
           "ToolkeeperConfig",
           "all_tools_with_runtime", "chain_policy", "explain", "load_config", "policy_from"]
