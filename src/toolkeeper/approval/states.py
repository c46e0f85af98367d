"""The approval state machine as data: the states, every allowed transition, and who may make it.

Both stores (SQLite and PostgreSQL) take the ``WHERE state IN (…)`` of each conditional
``UPDATE`` and the state it sets from ``TRANSITIONS``, so the table is what they allow: a move
it does not list changes nothing. docs/approval.md draws the table with ``mermaid()`` and lists
it with ``table()``; a test holds the page to both.

Who moves a request:

- the **service** stores a request (the approval service, or a handler it asks) and tells a
  run's result again, once, to the same call made again;
- a **person** decides: the approval page, the HTTP API, the CLI, a client's answer to the
  question it was asked, or a handler that answers for one (auto, callback, terminal);
- a **rule** decides for the service: ``expired`` (nobody decided before the call's wait or the
  request's time-to-live ran out), CONTINUE_ON_TIMEOUT's approval (approver ``timeout``) and
  ``fire_and_continue`` (announced, not waited for);
- the **executor** (the invoker, the one door) claims an approved request and completes it.

A person's decision applies only before the request's time-to-live: the store expires a request
past it first, so the person's decision finds it decided. That guard is the store's; the table
says which moves exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from ..errors import StoreError

__all__ = ["ACTORS", "RULES", "STATES", "TRANSITIONS", "Actor", "Operation", "State",
           "Transition", "decider", "edges", "mermaid", "sources", "table", "transition"]

State = Literal["pending", "approved", "denied", "skipped", "expired", "executing", "done"]
STATES: tuple[State, ...] = get_args(State)
Operation = Literal["create", "decide", "expire", "claim", "complete", "replay"]
Actor = Literal["service", "person", "rule", "executor"]

ACTORS: dict[Actor, str] = {
    "service": "the approval service, or a handler storing the request it was asked",
    "person": "the page, the HTTP API, the CLI, a client's answer, or a handler answering for one",
    "rule": "the service's own: `expired`, or approved by `timeout` or `fire_and_continue`",
    "executor": "the invoker (the one door) running an approved call",
}

RULES = frozenset({"timeout", "fire_and_continue"})
"""Approvers that are rules, not people: their decisions are the service's own (``timeout``
approves a CONTINUE_ON_TIMEOUT request nobody answered)."""


@dataclass(frozen=True, kw_only=True)
class Transition:
    """One allowed move: ``operation`` by ``by`` takes a request in one of ``sources`` to
    ``target`` (``sources`` empty: the request is new)."""

    operation: Operation
    sources: tuple[State, ...]
    target: State
    by: Actor
    when: str = ""


TRANSITIONS: tuple[Transition, ...] = (
    Transition(operation="create", sources=(), target="pending", by="service"),
    Transition(operation="decide", sources=("pending",), target="approved", by="person",
               when="before its time-to-live"),
    Transition(operation="decide", sources=("pending",), target="denied", by="person",
               when="before its time-to-live"),
    Transition(operation="decide", sources=("pending",), target="skipped", by="person",
               when="before its time-to-live"),
    Transition(operation="decide", sources=("pending",), target="approved", by="rule",
               when="FIRE_AND_CONTINUE at once; CONTINUE_ON_TIMEOUT when its call's wait ends"),
    Transition(operation="decide", sources=("pending",), target="expired", by="rule",
               when="its call stopped waiting"),
    Transition(operation="expire", sources=("pending",), target="approved", by="rule",
               when="past its time-to-live, CONTINUE_ON_TIMEOUT"),
    Transition(operation="expire", sources=("pending",), target="expired", by="rule",
               when="past its time-to-live, any other mode"),
    Transition(operation="claim", sources=("approved",), target="executing", by="executor",
               when="exactly one caller wins"),
    Transition(operation="complete", sources=("executing",), target="done", by="executor"),
    Transition(operation="replay", sources=("done",), target="done", by="service",
               when="once: its result is marked told"),
)


def stored(value: object) -> State:
    """A state read back from a store's row (``timeout``, an expired request's earlier name,
    as ``expired``)."""
    if value == "timeout":
        return "expired"
    for state in STATES:
        if value == state:
            return state
    raise StoreError(f"the store holds {value!r} as an approval's state, which is none of "
                     f"{', '.join(STATES)}: the table was written by something else")


def decider(outcome: str, approver: str) -> Actor:
    """Who made a decision: an ``expired`` outcome or a rule's approver is the service's rule;
    anything else is a person's."""
    return "rule" if outcome in ("expired", "timeout") or approver in RULES else "person"


def transition(operation: Operation, by: Actor, target: str | None = None
               ) -> Transition | None:
    """The move ``operation`` by ``by`` may make (to ``target``, where the operation has
    several); ``None`` when the table has none — the store then changes nothing."""
    found = [t for t in TRANSITIONS if t.operation == operation and t.by == by
             and (target is None or t.target == target)]
    if len(found) > 1:
        raise ValueError(f"{operation} by {by} has several targets; name one")
    return found[0] if found else None


def sources(operation: Operation, by: Actor) -> tuple[State, ...]:
    """Every state some ``operation`` by ``by`` moves a request from, in table order."""
    return tuple(dict.fromkeys(s for t in TRANSITIONS if t.operation == operation
                               and t.by == by for s in t.sources))


def edges() -> frozenset[tuple[State | None, State]]:
    """Every (from, to) some operation allows; ``None`` is 'new'."""
    return frozenset((source, t.target) for t in TRANSITIONS
                     for source in (t.sources or (None,)))


def _terminal() -> list[State]:
    leaves = {source for source, target in edges() if source != target}
    return [state for state in STATES if state not in leaves]


def mermaid() -> str:
    """The table as a mermaid ``stateDiagram-v2``: one arrow per (from, to), labelled with every
    operation and who may make it."""
    labels: dict[tuple[State | None, State], list[str]] = {}
    for t in TRANSITIONS:
        for source in t.sources or (None,):
            label = f"{t.operation} by {t.by}"
            if label not in labels.setdefault((source, t.target), []):
                labels[source, t.target].append(label)
    lines = ["stateDiagram-v2"]
    for (source, target), said in labels.items():
        lines.append(f"    {source or '[*]'} --> {target}: {' / '.join(said)}")
    lines += [f"    {state} --> [*]" for state in _terminal()]
    return "\n".join(lines) + "\n"


def table() -> str:
    """The table as a markdown table: operation, from, to, who may, and when."""
    rows = ["| operation | from | to | who may | when |", "|---|---|---|---|---|"]
    for t in TRANSITIONS:
        sources = ", ".join(t.sources) or "(new)"
        rows.append(f"| {t.operation} | {sources} | {t.target} | {t.by} | {t.when} |")
    rows += ["", *(f"- **{actor}**: {said}" for actor, said in ACTORS.items())]
    return "\n".join(rows) + "\n"
