"""The signature of toolkeeper's JSON webhooks, so a team's own bot can tell them from a
forgery: HMAC-SHA256, keyed with the configured secret, over ``"{timestamp}.{body}"``.

Headers: ``X-Toolkeeper-Timestamp`` (Unix seconds) and ``X-Toolkeeper-Signature: v1=<hex>``.
A receiver recomputes the HMAC over the exact bytes it received, compares in constant time, and
refuses a timestamp older than a few minutes (a replayed message).
"""

from __future__ import annotations

import hashlib
import hmac
import time

__all__ = ["MAX_AGE_S", "SIGNATURE", "TIMESTAMP", "sign", "verify"]

SIGNATURE = "X-Toolkeeper-Signature"
TIMESTAMP = "X-Toolkeeper-Timestamp"
MAX_AGE_S = 300.0
"""How old a signed message may be when it is checked."""


def _mac(key: bytes, timestamp: str, body: bytes) -> str:
    return hmac.new(key, timestamp.encode("ascii") + b"." + body, hashlib.sha256).hexdigest()


def sign(key: bytes, body: bytes, *, now: float | None = None) -> dict[str, str]:
    """The headers that sign ``body``."""
    timestamp = str(int(time.time() if now is None else now))
    return {TIMESTAMP: timestamp, SIGNATURE: f"v1={_mac(key, timestamp, body)}"}


def verify(key: bytes, body: bytes, timestamp: str, signature: str, *,
           max_age_s: float = MAX_AGE_S, now: float | None = None) -> bool:
    """Whether ``signature`` signs ``body`` at ``timestamp`` with ``key``, recently enough."""
    if not timestamp.isdigit() or not signature.startswith("v1="):
        return False
    age = (time.time() if now is None else now) - int(timestamp)
    if abs(age) > max_age_s:
        return False
    return hmac.compare_digest(signature[3:], _mac(key, timestamp, body))
