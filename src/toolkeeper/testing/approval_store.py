"""A conformance suite every ``ApprovalStore`` must pass.

Subclass it in a pytest module and provide ``make_store``::

    class TestMyStore(ApprovalStoreConformance):
        def make_store(self, tmp_path):
            return MyStore(...)

It needs pytest and Hypothesis (``toolkeeper[testing]``; without them importing it says so in
one line): ``ApprovalWalk`` applies random sequences of operations to one
or more stores and holds every step to the state table (``toolkeeper.approval.states``).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

from ..approval import states
from ..approval.journal import Asking, JournalEntry, journals_of
from ..approval.models import ApprovalDecision, ApprovalRequest, Outcome, args_digest
from ..approval.store import ApprovalStore, Replays, Settles, StoredApproval
from ..core.risk import HitlMode, ToolRisk
from ..extras import missing

try:
    from hypothesis import HealthCheck, settings
    from hypothesis import strategies as st
    from hypothesis.stateful import (
        Bundle,
        RuleBasedStateMachine,
        precondition,
        rule,
        run_state_machine_as_test,
    )
except ImportError as exc:
    raise missing("testing", "ApprovalStoreConformance (toolkeeper.testing)") from exc

__all__ = ["ApprovalStoreConformance", "ApprovalWalk"]

WALK = settings(max_examples=100, stateful_step_count=30, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])
"""How far the conformance suite walks: 100 sequences of up to 30 operations."""
_UNKNOWN = "apr_no_such_request"
_TTLS: dict[str, float | None] = {"none": None, "future": 3600.0, "past": -1.0}
_MODES = (HitlMode.BLOCKING, HitlMode.CONTINUE_ON_TIMEOUT, HitlMode.FIRE_AND_CONTINUE)
_APPROVERS = ("", "page", "cli", "client:c1", "timeout", "fire_and_continue")


def _request(session: str = "s1", tool: str = "wire_money") -> ApprovalRequest:
    arguments = {"amount": 5, "to": "bob"}
    return ApprovalRequest(call_id="c1", tool=tool, risk=ToolRisk.CRITICAL, arguments=arguments,
                           args_digest=args_digest(arguments), session_id=session)


class ApprovalStoreConformance:
    """The behaviours toolkeeper relies on: round trip, final decisions, single claims, and
    every move the state table allows — and none it forbids — under random walks."""

    def make_store(self, tmp_path: Path) -> ApprovalStore:
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
        assert stored is not None and stored.decision is not None
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
        assert stored is not None and stored.state == "done" and stored.result == {"status": "ok"}

    def test_a_run_journal_keeps_each_answer_once_and_names_the_script_of_its_request(
            self, tmp_path: Path) -> None:
        journals = journals_of(self.make_store(tmp_path))
        if journals is None:  # a store without journals: code mode does not pause under it
            return
        request = _request(session="s1")
        entries = [JournalEntry(seq=n, tool="note", args_digest=f"d{n}", line=n,
                                answer={"status": "ok", "text": f"noted {n}"}) for n in (1, 2)]
        asking = Asking(seq=3, tool=request.tool, args_digest=request.args_digest, line=7)
        journals.write("run_1", session_id="s1", code="script", entries=entries[:1],
                       asking=asking)
        journals.write("run_1", session_id="s1", code="script", entries=[
            JournalEntry(seq=1, tool="note", args_digest="d1", line=1,
                         answer={"status": "error"}), entries[1]])
        found = journals.load("run_1")
        assert found is not None and found.entries == tuple(entries)  # the first answer stays
        assert (found.code, found.asking, found.request_id) == ("script", asking, None)
        shown = journals.script_for(request)  # found by its asking call before it is linked
        assert shown is not None and (shown.code, shown.line) == ("script", 7)
        assert shown.before == (("note", "ok"), ("note", "ok"))
        journals.link("run_1", request.id)
        assert journals.load("run_1").request_id == request.id  # type: ignore[union-attr]
        assert journals.script_for(_request(session="s2")) is None
        journals.drop("run_1")
        assert journals.load("run_1") is None and journals.script_for(request) is None

    def test_no_walk_of_operations_makes_a_move_the_state_table_forbids(
            self, tmp_path: Path) -> None:
        ApprovalWalk.run([self.make_store(tmp_path)])


@dataclass(kw_only=True)
class _Expected:
    """Where the state table says a request stands."""

    request: ApprovalRequest
    state: states.State
    decision: tuple[str, str] | None = None  # (outcome, approver)
    result: dict[str, object] | None = None


class ApprovalWalk(RuleBasedStateMachine):
    """Random operations (create, decide by a person or a rule, settle, claim, complete, replay,
    list) applied alike to every store in ``stores``, each a fresh session's requests.

    The expected state comes from ``toolkeeper.approval.states`` alone; after every step each
    store must hold it, every change it observes must be an edge of the table, an operation the
    table forbids must change nothing (the stored request is equal to before) and the stores
    must answer alike. A request past its time-to-live is made with ``expires_at`` in the past.
    ``settle`` and ``replay`` are walked where every store declares them (``Settles``,
    ``Replays``).
    """

    requests = Bundle("requests")

    def __init__(self, stores: Sequence[ApprovalStore]) -> None:
        super().__init__()
        self.stores = list(stores)
        self.session = "walk-" + secrets.token_hex(8)
        self.expected: dict[str, _Expected] = {}
        self.seen: list[dict[str, StoredApproval]] = [{} for _ in self.stores]
        self.moved: set[str] = set()

    @classmethod
    def run(cls, stores: Sequence[ApprovalStore], *, walk: settings = WALK) -> None:
        """Walk ``stores`` (the same operations on each) as ``walk`` says."""
        # the factory is called for each walk; Hypothesis's stub names only a class
        run_state_machine_as_test(lambda: cls(stores), settings=walk)  # type: ignore[arg-type]

    def _all(self, ability: type) -> bool:
        return all(isinstance(store, ability) for store in self.stores)

    @rule(target=requests, ttl=st.sampled_from(list(_TTLS)), mode=st.sampled_from(_MODES))
    def create(self, ttl: str, mode: HitlMode) -> str:
        now, offset = time.time(), _TTLS[ttl]
        request = ApprovalRequest(
            call_id="c1", tool="wire_money", risk=ToolRisk.CRITICAL, hitl_mode=mode,
            arguments={"amount": 5}, args_digest=args_digest({"amount": 5}),
            session_id=self.session, created_at=now,
            expires_at=None if offset is None else now + offset)
        move = states.transition("create", "service")
        assert move is not None and move.sources == ()
        self.expected[request.id] = _Expected(request=request, state=move.target)
        self.moved.add(request.id)
        self._answers(lambda store: store.create(request), None)
        return request.id

    @rule(request_id=requests, outcome=st.sampled_from(get_args(Outcome)),
          approver=st.sampled_from(_APPROVERS))
    def decide(self, request_id: str, outcome: Outcome, approver: str) -> None:
        by = states.decider(outcome, approver)
        if by == "person":  # a person never decides a request past its time-to-live
            self._expire(request_id)
        applied = self._move(request_id, "decide", by, outcome)
        if applied:
            self.expected[request_id].decision = (outcome, approver)
        decision = ApprovalDecision(request_id=request_id, outcome=outcome, approver=approver,
                                    message="walk")
        self._answers(lambda store: store.decide(decision), applied)

    @precondition(lambda self: self._all(Settles))
    @rule(request_id=st.one_of(st.none(), requests))
    def settle(self, request_id: str | None) -> None:
        targets = list(self.expected) if request_id is None else [request_id]
        ended = {r for r in targets if self._expire(r)}
        for store in self.stores:  # a store may hold other walks' requests: count only ours
            assert isinstance(store, Settles)  # the precondition: every store settles
            assert set(store.settle(request_id)) & ({request_id} | set(self.expected)) == ended
        self._check()

    @rule(request_id=requests, steps=st.integers(1, 4))
    def advance(self, request_id: str, steps: int) -> None:
        """The next ``steps`` steps of a run — approve, claim, complete, tell again — so walks
        reach the later states and every other operation is tried on them too."""
        for _ in range(steps):
            state = self.expected[request_id].state
            if state == "approved":
                self.claim(request_id)
            elif state == "executing":
                self.complete(request_id, 1)
            elif state == "done" and self._all(Replays):
                self.replay(request_id)
            else:
                self.decide(request_id, "approved", "page")

    @rule()
    def touch_an_unknown_request(self) -> None:
        for store in self.stores:
            decided = store.decide(ApprovalDecision(request_id=_UNKNOWN, outcome="approved"))
            assert (decided, store.claim(_UNKNOWN)) == (False, False)
            store.complete(_UNKNOWN, {"status": "ok"})
            assert not isinstance(store, Replays) or store.replay(_UNKNOWN) is None
        self._check()

    @rule()
    def list_pending(self) -> None:
        for request_id in self.expected:
            self._expire(request_id)
        undecided = states.sources("decide", "person")
        want = sorted(r for r, e in self.expected.items() if e.state in undecided)
        self._answers(lambda store: sorted(r.id for r in store.pending(self.session)), want)

    @rule(request_id=requests)
    def claim(self, request_id: str) -> None:
        claimed = self._move(request_id, "claim", "executor")
        self._answers(lambda store: store.claim(request_id), claimed)

    @rule(request_id=requests, n=st.integers(0, 9))
    def complete(self, request_id: str, n: int) -> None:
        if self._move(request_id, "complete", "executor"):
            self.expected[request_id].result = {"status": "ok", "n": n}
        self._answers(lambda store: store.complete(request_id, {"status": "ok", "n": n}), None)

    @precondition(lambda self: self._all(Replays))
    @rule(request_id=requests)
    def replay(self, request_id: str) -> None:
        expected, move = self.expected.get(request_id), states.transition("replay", "service")
        told = None
        if expected is not None and move is not None and expected.state in move.sources \
                and expected.result is not None and not expected.result.get("replayed"):
            told, expected.state = expected.result, move.target
            expected.result = {**told, "replayed": True}
            self.moved.add(request_id)
        self._answers(lambda store: _replayed(store, request_id), told)

    def _move(self, request_id: str, operation: states.Operation, by: states.Actor,
              target: str | None = None) -> bool:
        """Make the table's move on the expected state; ``False`` when the table forbids it."""
        expected = self.expected.get(request_id)
        move = states.transition(operation, by, target)
        if expected is None or move is None or expected.state not in move.sources:
            return False
        expected.state = move.target
        self.moved.add(request_id)
        return True

    def _expire(self, request_id: str) -> bool:
        """What settling does to a request past its time-to-live: CONTINUE_ON_TIMEOUT's is
        approved by the rule ``timeout``, any other expires."""
        expected = self.expected.get(request_id)
        if expected is None or expected.request.expires_at is None \
                or expected.request.expires_at > time.time():
            return False
        approves = expected.request.hitl_mode is HitlMode.CONTINUE_ON_TIMEOUT
        outcome, approver = ("approved", "timeout") if approves else ("expired", "")
        if not self._move(request_id, "expire", "rule", outcome):
            return False
        expected.decision = (outcome, approver)
        return True

    def _answers(self, operation: Callable[[ApprovalStore], object], want: object) -> None:
        """Apply ``operation`` to every store: each must answer ``want`` and then hold what
        the table says."""
        for store in self.stores:
            got = operation(store)
            assert got == want, f"{type(store).__name__} answered {got!r}, the table {want!r}"
        self._check()

    def _check(self) -> None:
        edges = states.edges()
        for store, seen in zip(self.stores, self.seen, strict=True):
            name = type(store).__name__
            assert store.get(_UNKNOWN) is None
            for request_id, expected in self.expected.items():
                now, before = store.get(request_id), seen.get(request_id)
                assert now is not None and now.state == expected.state, (
                    f"{name}: {request_id} is {now and now.state}, the table says "
                    f"{expected.state}")
                if request_id not in self.moved:
                    assert now == before, f"{name}: {request_id} changed by a forbidden move"
                was = before.state if before is not None else None
                assert (was, now.state) in edges or was == now.state, (
                    f"{name}: {was} → {now.state} is not in the state table")
                decided = now.decision and (now.decision.outcome, now.decision.approver)
                assert decided == expected.decision and now.result == expected.result, name
                seen[request_id] = now
        self.moved.clear()


def _replayed(store: ApprovalStore, request_id: str) -> dict[str, object] | None:
    """What ``store`` tells of a run, once (``replay`` is walked where every store has it)."""
    assert isinstance(store, Replays)
    return store.replay(request_id)
