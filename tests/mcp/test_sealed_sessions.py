"""Session ids sealed under a store's key: what one server seals, another with the same key
opens; an id altered, sealed under another key, or made for a ``requestState`` opens nowhere.
(Served for real, through a load balancer over three replicas: tests/server/
test_replicas_sessions.py.)"""

from __future__ import annotations

import secrets

import pytest
from mcp.server.request_state import InvalidRequestState

from toolkeeper.mcp.asking import state_security
from toolkeeper.mcp.sealed_sessions import SessionSeal

STATE = {"c": "default", "p": {"protocolVersion": "2025-11-25", "capabilities": {}}, "t": 1}


def test_what_one_server_seals_another_with_the_same_key_opens() -> None:
    key = secrets.token_hex(32)
    sealed = SessionSeal(key).seal(STATE)
    assert SessionSeal(key).open(sealed) == STATE
    assert all(0x21 <= ord(c) <= 0x7E for c in sealed)  # a header's visible ASCII
    assert "default" not in sealed and sealed != SessionSeal(key).seal(STATE)  # opaque, fresh


@pytest.mark.parametrize("change", ["flip", "other-key", "truncated", "not-ours"])
def test_an_altered_or_foreign_id_opens_nowhere(change: str) -> None:
    key = secrets.token_hex(32)
    sealed = SessionSeal(key).seal(STATE)
    forged = {"flip": sealed[:-3] + ("A" if sealed[-3] != "A" else "B") + sealed[-2:],
              "other-key": SessionSeal(secrets.token_hex(32)).seal(STATE),
              "truncated": sealed[:20],
              "not-ours": "0123456789abcdef0123456789abcdef"}[change]
    assert SessionSeal(key).open(forged) is None


def test_a_session_id_and_a_request_state_are_never_taken_for_one_another() -> None:
    key = secrets.token_hex(32)
    sealed = SessionSeal(key).seal(STATE)
    with pytest.raises(InvalidRequestState):
        state_security(key, None).codec.unseal(sealed)
    state = state_security(key, None).codec.seal(b'{"c": "default"}')
    assert SessionSeal(key).open(state) is None
