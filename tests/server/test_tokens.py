"""The key ``requestState`` is sealed under: made once per store, the same for every server
that opens it, another for another store."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper.errors import ConfigError
from toolkeeper.server.tokens import shared_state_key, upstream_key


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


def test_the_upstream_key_is_the_operator_s_made_once_owner_only_or_given(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLKEEPER_UPSTREAM_KEY", raising=False)
    made = upstream_key(tmp_path)
    assert len(made) == 32 and upstream_key(tmp_path) == made
    assert (tmp_path / "upstream-key").stat().st_mode & 0o777 == 0o600
    monkeypatch.setenv("TOOLKEEPER_UPSTREAM_KEY", (tmp_path / "upstream-key").read_text())
    assert upstream_key(tmp_path / "elsewhere") == made  # a replica given the same key
    monkeypatch.setenv("TOOLKEEPER_UPSTREAM_KEY", "short")
    with pytest.raises(ConfigError, match="TOOLKEEPER_UPSTREAM_KEY must hold 32 bytes"):
        upstream_key(tmp_path)
