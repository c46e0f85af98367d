"""The queue's figures: waiting now, the oldest wait, the median and 95th percentile of the time
from a request to its decision, and how many expired."""

from __future__ import annotations

import time
from pathlib import Path

from toolkeeper.approval import ApprovalDecision, ApprovalRequest, SqliteApprovalStore


def _request(n: int, **times: float) -> ApprovalRequest:
    return ApprovalRequest(call_id=f"c{n}", tool="t", risk="high", arguments={"n": n},
                           args_digest=str(n), session_id="s", **times)


def test_the_figures_of_a_queue(tmp_path: Path) -> None:
    store = SqliteApprovalStore(tmp_path / "a.db")
    assert (store.figures().waiting, store.figures().median_s) == (0, None)
    waits = [float(w) for w in range(1, 21)]  # 20 decisions that took 1 s … 20 s
    for n, wait in enumerate(waits):
        request = _request(n)
        store.create(request)
        store.decide(ApprovalDecision(request_id=request.id, outcome="approved" if n % 2
                                      else "denied"))
        with store.db.transaction() as conn:  # when each was asked and decided, exactly
            conn.execute("UPDATE approval_events SET ts = ? WHERE request_id = ? AND state = "
                         "'pending'", (1000.0, request.id))
            conn.execute("UPDATE approval_events SET ts = ? WHERE request_id = ? AND state != "
                         "'pending'", (1000.0 + wait, request.id))
    store.create(_request(98, created_at=time.time() - 10, expires_at=time.time() - 1))
    waiting = _request(99)
    store.create(waiting)
    with store.db.transaction() as conn:
        conn.execute("UPDATE approvals SET updated_at = ? WHERE id = ?",
                     (time.time() - 300, waiting.id))
    figures = store.figures()
    assert (figures.waiting, figures.expired) == (1, 1)
    assert (figures.median_s, figures.p95_s) == (10.0, 19.0)
    assert figures.oldest_s is not None and 299 < figures.oldest_s < 400
