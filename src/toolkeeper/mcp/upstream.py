"""Moved to ``toolkeeper.gateway.upstream`` (the gateway is its own room); this name stays."""

from ..gateway.upstream import Upstream, UpstreamError

__all__ = ["Upstream", "UpstreamError"]
