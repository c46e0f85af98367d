"""Moved to ``toolkeeper.gateway.gateway`` (the gateway is its own room); this name stays."""

from ..gateway.gateway import MCPGateway, remote_risk

__all__ = ["MCPGateway", "remote_risk"]
