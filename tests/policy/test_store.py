"""The rules table, on a real SQLite file and on PostgreSQL: a rule added and revoked moves
the version every process watches; uses are counted; a revoked or expired rule is no longer in
force but stays listed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from toolkeeper.policy import PolicyRule, PolicyStore


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> PolicyStore:
    if request.param == "sqlite":
        return PolicyStore(tmp_path / "toolkeeper.db")
    return PolicyStore(request.getfixturevalue("postgres_url"))


def _rule(rule_id: str, expires: float | None = None) -> PolicyRule:
    return PolicyRule(id=rule_id, author="ann", reason="why", created=time.time(),
                      expires=expires, cedar="permit (principal, action, resource);")


def test_rules_are_added_counted_revoked_and_expire(store: PolicyStore) -> None:
    assert (store.version(), store.rules()) == (0, [])
    store.add(_rule("rule_a"))
    store.add(_rule("rule_old", expires=time.time() - 1))
    first = store.version()
    assert first > 0 and [r.id for r in store.rules()] == ["rule_a"]
    store.add_uses({"rule_a": 2})
    store.add_uses({"rule_a": 1})
    assert store.version() == first  # counting is not a change of the set
    assert store.get("rule_a").uses == 3  # type: ignore[union-attr]
    assert store.revoke("rule_a") and not store.revoke("rule_a") and not store.revoke("nope")
    assert store.version() > first and store.rules() == []
    kept = {r.id: r for r in store.rules(everything=True)}
    assert kept["rule_a"].revoked is not None and not kept["rule_old"].live()
