"""The JSON webhook's signature: HMAC-SHA256 over the timestamp and the exact body, checked in
constant time, refused when altered, keyed otherwise, or replayed late."""

from __future__ import annotations

import time

from toolkeeper.notify import sign, verify
from toolkeeper.notify.signing import SIGNATURE, TIMESTAMP

KEY = b"0123456789abcdef-a-shared-secret"


def test_a_signed_body_verifies_and_any_change_does_not() -> None:
    body = b'{"event": "approval.requested"}'
    headers = sign(KEY, body)
    assert headers[SIGNATURE].startswith("v1=") and len(headers[SIGNATURE]) == 3 + 64
    assert verify(KEY, body, headers[TIMESTAMP], headers[SIGNATURE])
    assert not verify(KEY, body + b" ", headers[TIMESTAMP], headers[SIGNATURE])
    assert not verify(b"another key of the same length!!", body, headers[TIMESTAMP],
                      headers[SIGNATURE])
    later = str(int(headers[TIMESTAMP]) + 1)
    assert not verify(KEY, body, later, headers[SIGNATURE])  # the timestamp is signed too


def test_an_old_message_is_refused_as_a_replay() -> None:
    body = b"{}"
    headers = sign(KEY, body, now=time.time() - 600)
    assert not verify(KEY, body, headers[TIMESTAMP], headers[SIGNATURE])
    assert verify(KEY, body, headers[TIMESTAMP], headers[SIGNATURE], max_age_s=900)
    assert not verify(KEY, body, "not-a-number", headers[SIGNATURE])
