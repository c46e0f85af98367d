"""A conformance suite every ``AuditLog`` must pass.

Subclass it in a pytest module and provide ``make_log``::

    class TestMyAudit(AuditLogConformance):
        def make_log(self, tmp_path):
            return MyAuditLog(...)
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ..invoke.audit import AuditEntry, AuditLog

__all__ = ["AuditLogConformance"]


def _entry(n: int, *, tool: str = "send_email", status: str = "ok",
           session: str = "s1", arguments: dict[str, object] | None = None) -> AuditEntry:
    return AuditEntry(ts=time.time(), call_id=f"c{n}", session_id=session, tool=tool,
                      args_digest=f"{n:064x}", arguments=arguments or {"n": n}, status=status,
                      error_code=None if status == "ok" else "denied", duration_ms=1.5)


class AuditLogConformance:
    """What toolkeeper relies on: rows kept, filtered, newest first, secrets masked, none lost
    under concurrent writers."""

    def make_log(self, tmp_path: Path) -> AuditLog:
        raise NotImplementedError

    def test_rows_come_back_newest_first_and_filtered(self, tmp_path: Path) -> None:
        log = self.make_log(tmp_path)
        log.record(_entry(1))
        log.record(_entry(2, tool="wire_money", status="denied", session="s2"))
        log.record(_entry(3))
        assert [e.call_id for e in log.query()] == ["c3", "c2", "c1"]
        assert [e.call_id for e in log.query(tool="wire_money")] == ["c2"]
        assert [e.call_id for e in log.query(status="ok")] == ["c3", "c1"]
        assert [e.call_id for e in log.query(session_id="s2")] == ["c2"]
        assert [e.call_id for e in log.query(limit=1)] == ["c3"]
        first = log.query(tool="wire_money")[0]
        assert (first.status, first.error_code, first.duration_ms) == ("denied", "denied", 1.5)

    def test_secrets_in_arguments_are_masked(self, tmp_path: Path) -> None:
        log = self.make_log(tmp_path)
        log.record(_entry(1, arguments={"header": "Authorization: Bearer sk-live-1234567890abcdef"}))
        (entry,) = log.query()
        assert "sk-live-1234567890abcdef" not in str(entry.arguments)

    def test_concurrent_writers_lose_nothing(self, tmp_path: Path) -> None:
        log = self.make_log(tmp_path)

        def write(worker: int) -> None:
            for n in range(50):
                log.record(_entry(worker * 1000 + n, session=f"w{worker}"))

        threads = [threading.Thread(target=write, args=(w,)) for w in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        rows = log.query(limit=1000)
        assert len(rows) == 400 and len({e.call_id for e in rows}) == 400
