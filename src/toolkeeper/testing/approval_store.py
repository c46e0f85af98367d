"""A conformance suite every ``ApprovalStore`` must pass.

Subclass it in a pytest module and provide ``make_store``::

    class TestMyStore(ApprovalStoreConformance):
        def make_store(self, tmp_path):
            return MyStore(...)
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from ..approval.models import ApprovalDecision, ApprovalRequest, args_digest
from ..core.risk import ToolRisk

__all__ = ["ApprovalStoreConformance"]


def _request(session: str = "s1", tool: str = "wire_money") -> ApprovalRequest:
    arguments = {"amount": 5, "to": "bob"}
    return ApprovalRequest(call_id="c1", tool=tool, risk=ToolRisk.CRITICAL, arguments=arguments,
                           args_digest=args_digest(arguments), session_id=session)


class ApprovalStoreConformance:
    """The behaviours toolkeeper relies on: round trip, final decisions, single claims."""

    def make_store(self, tmp_path: Path) -> Any:
        raise NotImplementedError

    def test_a_request_round_trips_and_is_pending(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        request = _request()
        store.create(request)
        stored = store.get(request.id)
        assert stored is not None and stored.request == request and stored.state == "pending"
        assert [r.id for r in store.pending()] == [request.id]
        assert store.pending("other-session") == []
        assert store.get("nope") is None

    def test_a_decision_is_final(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        request = _request()
        store.create(request)
        assert store.decide(ApprovalDecision(request_id=request.id, outcome="denied"))
        assert not store.decide(ApprovalDecision(request_id=request.id, outcome="approved"))
        stored = store.get(request.id)
        assert stored.state == "denied" and stored.decision.outcome == "denied"
        assert store.pending() == []

    def test_an_approved_request_is_claimed_once(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        request = _request()
        store.create(request)
        assert not store.claim(request.id)  # not approved yet
        store.decide(ApprovalDecision(request_id=request.id, outcome="approved"))
        wins: list[bool] = []
        threads = [threading.Thread(target=lambda: wins.append(store.claim(request.id)))
                   for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert sorted(wins) == [False] * 7 + [True]
        store.complete(request.id, {"status": "ok"})
        stored = store.get(request.id)
        assert stored.state == "done" and stored.result == {"status": "ok"}
