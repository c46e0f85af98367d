"""The approval state machine is one table: what it allows is what the stores do, and
docs/approval.md draws exactly it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import get_args

import pytest

from toolkeeper.approval import PostgresApprovalStore, SqliteApprovalStore, states
from toolkeeper.approval.models import ApprovalDecision, ApprovalRequest, Outcome, args_digest
from toolkeeper.core.risk import ToolRisk
from toolkeeper.testing.approval_store import ApprovalWalk

DOC = Path(__file__).resolve().parents[2] / "docs" / "approval.md"
FINAL = ("denied", "skipped", "expired", "done")


def _request() -> ApprovalRequest:
    return ApprovalRequest(call_id="c1", tool="wire_money", risk=ToolRisk.CRITICAL,
                           arguments={"amount": 5}, args_digest=args_digest({"amount": 5}),
                           session_id="s1")


def _moves(**match: object) -> list[states.Transition]:
    return [t for t in states.TRANSITIONS
            if all(getattr(t, key) == value for key, value in match.items())]


def test_the_page_draws_the_table_the_stores_apply() -> None:
    page = DOC.read_text()
    assert f"```mermaid\n{states.mermaid()}```" in page, (
        "docs/approval.md's diagram differs from states.mermaid(); paste its output there")
    assert states.table() in page, (
        "docs/approval.md's table differs from states.table(); paste its output there")


def test_the_architecture_page_draws_the_same_table() -> None:
    page = (DOC.parent / "architecture.md").read_text()
    assert f"```mermaid\n{states.mermaid()}```" in page, (
        "docs/architecture.md's diagram differs from states.mermaid(); paste its output there")


def test_every_state_is_reached_from_a_new_request() -> None:
    reached, frontier = set(), {target for source, target in states.edges() if source is None}
    while frontier:
        reached |= frontier
        frontier = {target for source, target in states.edges() if source in frontier} - reached
    assert reached == set(states.STATES)


def test_only_a_pending_request_is_decided_or_expires() -> None:
    for move in _moves(operation="decide") + _moves(operation="expire"):
        assert move.sources == ("pending",)
    assert {t.by for t in _moves(operation="decide")} == {"person", "rule"}
    assert {t.by for t in _moves(operation="expire")} == {"rule"}


def test_a_rule_only_approves_or_expires() -> None:
    assert {t.target for t in _moves(by="rule")} == {"approved", "expired"}


def test_a_run_is_an_approval_claimed_then_completed_by_the_executor() -> None:
    into_executing = [t for t in states.TRANSITIONS if t.target == "executing"]
    assert [(t.operation, t.sources, t.by) for t in into_executing] == [
        ("claim", ("approved",), "executor")]
    into_done = [t for t in states.TRANSITIONS if t.target == "done" and t.sources != ("done",)]
    assert [(t.operation, t.sources, t.by) for t in into_done] == [
        ("complete", ("executing",), "executor")]


def test_a_final_state_has_no_way_out_but_telling_a_run_again() -> None:
    out = [(t.operation, source, t.target) for t in states.TRANSITIONS for source in t.sources
           if source in FINAL]
    assert out == [("replay", "done", "done")]


def test_every_outcome_is_its_own_state_or_has_no_move() -> None:
    for outcome in get_args(Outcome):
        for by in get_args(states.Actor):
            move = states.transition("decide", by, outcome)
            assert move is None or move.target == outcome
    assert states.transition("decide", "person", "pending") is None


def test_an_expiry_or_a_rules_approver_is_the_rule_and_anyone_else_a_person() -> None:
    assert states.decider("expired", "") == "rule"
    assert states.decider("expired", "page") == "rule"
    assert states.decider("timeout", "") == "rule"  # an expiry's earlier name
    assert states.decider("approved", "fire_and_continue") == "rule"
    assert states.decider("approved", "timeout") == "rule"
    for approver in ("", "page", "cli", "auto", "client:c1"):
        assert states.decider("approved", approver) == "person"


def test_an_operation_with_several_targets_must_name_one() -> None:
    with pytest.raises(ValueError, match="several targets"):
        states.transition("decide", "person")


def test_a_move_taken_out_of_the_table_is_refused_by_the_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = SqliteApprovalStore(tmp_path / "toolkeeper.db")
    kept = tuple(t for t in states.TRANSITIONS
                 if t.operation != "claim" and (t.by, t.target) != ("person", "denied"))
    monkeypatch.setattr(states, "TRANSITIONS", kept)
    request = _request()
    store.create(request)
    assert not store.decide(ApprovalDecision(request_id=request.id, outcome="denied"))
    assert store.decide(ApprovalDecision(request_id=request.id, outcome="approved"))
    assert not store.claim(request.id)
    stored = store.get(request.id)
    assert stored is not None and stored.state == "approved"


def test_a_move_added_to_the_table_is_made_by_the_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = SqliteApprovalStore(tmp_path / "toolkeeper.db")
    widened = tuple(dataclasses.replace(t, sources=("pending", "approved"))
                    if t.operation == "claim" else t for t in states.TRANSITIONS)
    monkeypatch.setattr(states, "TRANSITIONS", widened)
    request = _request()
    store.create(request)
    assert store.claim(request.id)
    stored = store.get(request.id)
    assert stored is not None and stored.state == "executing"


def test_sqlite_and_postgresql_stores_walk_the_table_in_step(
        tmp_path: Path, postgres_url: str) -> None:
    ApprovalWalk.run([SqliteApprovalStore(tmp_path / "toolkeeper.db"),
                      PostgresApprovalStore(postgres_url)])
