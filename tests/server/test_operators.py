"""Named operators: ``tokens add NAME --operator`` makes a person's token (stored as a digest,
apart from the clients'), a name is one client's or one operator's, ``operator`` stays the
state dir's own; an OAuth operator is named by the token's ``sub``."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper.core.context import Caller
from toolkeeper.errors import UsageError
from toolkeeper.server.clients import ClientTokens, operator_name


def test_an_operator_token_names_a_person_and_is_no_clients(tmp_path: Path) -> None:
    tokens = ClientTokens(tmp_path / "state.db")
    alice = tokens.add("alice", operator=True)
    agent = tokens.add("ci")
    assert alice.startswith("tko_") and tokens.operator_for(alice) == "alice"
    assert tokens.client_for(alice) is None and tokens.operator_for(agent) is None
    assert [(t.name, t.operator) for t in tokens.list()] == [("ci", False), ("alice", True)]
    with pytest.raises(UsageError, match="already has a token"):
        tokens.add("alice")  # one name, one role
    with pytest.raises(UsageError, match="not an operator name"):
        tokens.add("operator", operator=True)  # the state dir's own token is named that
    assert tokens.revoke("alice") and tokens.operator_for(alice) is None


@pytest.mark.parametrize(("subject", "name"), [
    ("", "operator"), ("alice", "alice"), ("oauth:console:olga", "olga"),
    ("oauth:console", "console"),
])
def test_the_person_behind_an_operator_credential(subject: str, name: str) -> None:
    assert operator_name(Caller(client="operator", subject=subject)) == name
