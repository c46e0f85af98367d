"""Moved to ``toolkeeper.gateway.gateway`` (the gateway is its own room); this name stays as a
compatibility alias that goes away in 0.3.0 (import from ``toolkeeper.gateway``)."""

from ..gateway.gateway import MCPGateway, remote_risk

__all__ = ["MCPGateway", "remote_risk"]
