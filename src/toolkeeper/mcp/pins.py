"""Moved to ``toolkeeper.gateway.pins`` (the gateway is its own room); this name stays as a
compatibility alias that goes away in 0.3.0 (import from ``toolkeeper.gateway``)."""

from ..gateway.pins import Pin, SqlitePins, fingerprint

__all__ = ["Pin", "SqlitePins", "fingerprint"]
