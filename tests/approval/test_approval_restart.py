"""Approvals survive a killed process, and a resumed call runs exactly once across processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from toolkeeper.approval import ApprovalDecision, SqliteApprovalStore

WORKER = Path(__file__).with_name("approval_worker.py")


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(WORKER), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_for_pending(store: SqliteApprovalStore, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pending = store.pending()
        if pending:
            return pending[0].id
        time.sleep(0.05)
    raise AssertionError("the worker never stored its approval request")


def test_a_killed_process_leaves_its_request_pending_and_resume_runs_once(tmp_path: Path) -> None:
    db, log = tmp_path / "toolkeeper.db", tmp_path / "executions.log"
    log.touch()
    waiting = _start("request", str(db), str(log))
    try:
        approval_id = _wait_for_pending(SqliteApprovalStore(db))
        os.kill(waiting.pid, signal.SIGKILL)
        assert waiting.wait(timeout=30) == -signal.SIGKILL
    finally:
        if waiting.poll() is None:
            waiting.kill()
        waiting.communicate(timeout=30)  # reaped, its pipes closed
    # A fresh connection, as after a restart: the request is still pending, nothing ran.
    store = SqliteApprovalStore(db)
    assert [r.id for r in store.pending()] == [approval_id]
    assert store.get(approval_id).request.arguments == {"amount": 42, "to": "ann"}  # type: ignore[union-attr]
    assert log.read_text() == ""
    assert store.decide(ApprovalDecision(request_id=approval_id, outcome="approved",
                                         approver="ops"))
    racers = [_start("resume", str(db), str(log), approval_id) for _ in range(3)]
    outcomes = []
    for racer in racers:
        out, err = racer.communicate(timeout=60)
        assert racer.returncode == 0, err
        outcomes.append(json.loads(out.strip().splitlines()[-1]))
    statuses = sorted((o["status"], o["code"]) for o in outcomes)
    assert statuses == [("error", "already_executed"), ("error", "already_executed"), ("ok", None)]
    assert log.read_text() == "42->ann\n"
    assert store.get(approval_id).state == "done"  # type: ignore[union-attr]
