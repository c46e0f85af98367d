"""Rules kept in the store beside approvals (a SQLite file, or PostgreSQL shared by replicas):
the ones made from decisions, each with who made it, why, when, until when and how often it
decided.

Every add and revoke appends to ``policy_changes``; each process's ``Policies`` watches the
newest change (``version``) and rebuilds its set when it moves, so a rule saved on one replica
decides on every other within a poll. Only the operator's side writes here (the CLI on the state
dir; no client credential reaches a route that does).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..approval.pg import open_database
from ..approval.sqlite import Database, number, text_or_none

__all__ = ["PolicyRule", "PolicyStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS policy_rules (
    id TEXT PRIMARY KEY,
    author TEXT NOT NULL,
    reason TEXT NOT NULL,
    created REAL NOT NULL,
    expires REAL,
    uses INTEGER NOT NULL DEFAULT 0,
    cedar TEXT NOT NULL,
    revoked REAL
);
CREATE TABLE IF NOT EXISTS policy_changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    rule_id TEXT NOT NULL,
    change TEXT NOT NULL,
    ts REAL NOT NULL
);
"""
_COLUMNS = "id, author, reason, created, expires, uses, cedar, revoked"


@dataclass(frozen=True, kw_only=True, slots=True)
class PolicyRule:
    """A stored rule.

    Attributes:
        id: Its id (``rule_…``), which is also the policy's id in decisions and the audit.
        cedar: One Cedar policy.
        author: Who made it (the operator, a person's name).
        reason: Why (shown when it decides).
        created: When (``time.time()``).
        expires: Until when it decides; ``None``: until revoked.
        uses: How often it decided a call.
        revoked: When it was revoked, if it was.
    """

    id: str
    cedar: str
    author: str
    reason: str
    created: float
    expires: float | None = None
    uses: int = 0
    revoked: float | None = None

    def live(self, now: float | None = None) -> bool:
        """Whether it still decides: not revoked, not expired."""
        moment = time.time() if now is None else now
        return self.revoked is None and (self.expires is None or self.expires > moment)

    @staticmethod
    def new_id() -> str:
        return "rule_" + secrets.token_hex(6)


class PolicyStore:
    """The rules table in the store's database (``open_database``: a path or a URL)."""

    def __init__(self, target: str | Path | Database) -> None:
        self.db = open_database(target, _SCHEMA, "policy_rules")

    def add(self, rule: PolicyRule) -> None:
        now = time.time()
        with self.db.transaction() as conn:
            conn.execute(f"INSERT INTO policy_rules ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                         (rule.id, rule.author, rule.reason, rule.created, rule.expires,
                          rule.uses, rule.cedar, rule.revoked))
            conn.execute("INSERT INTO policy_changes (rule_id, change, ts) VALUES (?, ?, ?)",
                         (rule.id, "add", now))

    def revoke(self, rule_id: str) -> bool:
        """End ``rule_id`` now; ``False`` when there is no such rule still in force."""
        now = time.time()
        with self.db.transaction() as conn:
            cursor = conn.execute("UPDATE policy_rules SET revoked = ? WHERE id = ? AND "
                                  "revoked IS NULL", (now, rule_id))
            if cursor.rowcount != 1:
                return False
            conn.execute("INSERT INTO policy_changes (rule_id, change, ts) VALUES (?, ?, ?)",
                         (rule_id, "revoke", now))
        return True

    def spend(self, rule_id: str) -> bool:
        """Use up an ``@once`` rule: it decides this one call and no other, in any process
        sharing the store (the first to spend it wins); ``False`` when it was already spent,
        revoked or gone."""
        now = time.time()
        with self.db.transaction() as conn:
            cursor = conn.execute("UPDATE policy_rules SET revoked = ?, uses = uses + 1 WHERE "
                                  "id = ? AND revoked IS NULL AND (expires IS NULL OR "
                                  "expires > ?)", (now, rule_id, now))
            if cursor.rowcount != 1:
                return False
            conn.execute("INSERT INTO policy_changes (rule_id, change, ts) VALUES (?, ?, ?)",
                         (rule_id, "spend", now))
        return True

    def get(self, rule_id: str) -> PolicyRule | None:
        rows = self.db.query(f"SELECT {_COLUMNS} FROM policy_rules WHERE id = ?", (rule_id,))
        return _rule(rows[0]) if rows else None

    def rules(self, *, everything: bool = False) -> list[PolicyRule]:
        """The rules in force, oldest first (``everything``: revoked and expired too)."""
        rows = self.db.query(f"SELECT {_COLUMNS} FROM policy_rules ORDER BY created, id")
        found = [_rule(row) for row in rows]
        return found if everything else [rule for rule in found if rule.live()]

    def version(self) -> int:
        """The newest change's number (0 when there is none): it moves on every add and
        revoke, in any process that shares the database."""
        rows = self.db.query("SELECT COALESCE(MAX(seq), 0) FROM policy_changes")
        return int(number(rows[0][0]))

    def add_uses(self, uses: Mapping[str, int]) -> None:
        """Count decisions made by rules (batched by the watcher, off the call path)."""
        if not uses:
            return
        with self.db.transaction() as conn:
            for rule_id, count in uses.items():
                conn.execute("UPDATE policy_rules SET uses = uses + ? WHERE id = ?",
                             (count, rule_id))


def _rule(row: tuple[object, ...]) -> PolicyRule:
    rule_id, author, reason, created, expires, uses, cedar, revoked = row
    ends, gone = text_or_none(expires), text_or_none(revoked)
    return PolicyRule(id=str(rule_id), author=str(author), reason=str(reason),
                      created=number(created), expires=None if ends is None else float(ends),
                      uses=int(number(uses)), cedar=str(cedar),
                      revoked=None if gone is None else float(gone))
