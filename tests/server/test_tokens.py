"""The key ``requestState`` is sealed under: made once per store, the same for every server
that opens it, another for another store."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper.server.tokens import shared_state_key


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "toolkeeper.db")
    return str(request.getfixturevalue("postgres_url"))


def test_every_server_on_a_store_reads_the_key_the_first_one_made(store: str,
                                                                   tmp_path: Path) -> None:
    first = shared_state_key(store)
    assert len(bytes.fromhex(first)) == 32
    assert shared_state_key(store) == first
    assert shared_state_key(str(tmp_path / "other.db")) != first
