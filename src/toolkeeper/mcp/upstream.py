"""Moved to ``toolkeeper.gateway.upstream`` (the gateway is its own room); this name stays as
a compatibility alias that goes away in 0.3.0 (import from ``toolkeeper.gateway.upstream``)."""

from ..gateway.upstream import Upstream, UpstreamError

__all__ = ["Upstream", "UpstreamError"]
