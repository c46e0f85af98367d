"""Moved to ``toolkeeper.gateway.pins`` (the gateway is its own room); this name stays."""

from ..gateway.pins import Pin, SqlitePins, fingerprint

__all__ = ["Pin", "SqlitePins", "fingerprint"]
