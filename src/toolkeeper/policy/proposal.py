"""From a person's decision to a stored rule: the rule a card proposes ("allow similar",
"forbid similar") and the check that a rule saved from a decision is no wider than what the
person saw.

A proposal names this tool (``resource == Tool::"TOOL"``), this client or any client, and the
arguments that matter: a string with ``*`` is a pattern (``context.args.path like
"reports/*"``), any other value must be equal. A value the rule language cannot test as sent
(an object, a list, a decimal, a number past 64 bits, null) is ``Pinned``: the rule takes it
exactly as sent, by its digest (``context.digests.settings == "…"``), never leaves it out; an
argument with a name Cedar cannot spell pins the whole call (``context.args_digest``). The
person may edit the text before it is saved; what is saved must still name the request's tool
as its resource, an action that calls it (``Action::"TOOL"`` or ``Action::"call_tool"``), this
client or any client as its principal, and in its conditions only ``context.args`` of
arguments the card showed, ``context.digests`` and ``context.args_digest``. Anything else — another
tool, another action (``decide``), another client, the caller's or the tool's attributes, the
time — is refused with a message saying what to take out.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Literal

from ..errors import ConfigError
from .schema import CALL_TOOL
from .source import parse_text

__all__ = ["DURATIONS", "Pinned", "Proposal", "expiry_of", "narrow", "plain_name", "propose",
           "testable"]

DURATIONS: Mapping[str, float | None] = {"once": None, "1h": 3600.0, "8h": 8 * 3600.0,
                                         "24h": 24 * 3600.0, "revoked": None}
"""How long a rule from a decision decides: one call, an hour, 8 hours, a day, or until it is
revoked."""
_SHORT = re.compile(r"^(\d+(?:\.\d+)?)s$")
_ANNOTATIONS = frozenset({"reason", "once", "ask", "id"})


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LONG = 2**63


@dataclass(frozen=True)
class Pinned:
    """An argument a rule takes exactly as sent: the ``value_digest`` of its value."""

    digest: str


def plain_name(name: str) -> bool:
    """Whether a rule can name the argument ``name`` (``context.args.NAME``)."""
    return _NAME.fullmatch(name) is not None


def testable(value: object) -> bool:
    """Whether a rule can test ``value`` as the card shows it: a string, true/false, or a
    whole number Cedar holds (64 bits)."""
    if isinstance(value, bool | str):
        return True
    return isinstance(value, int) and -_LONG <= value < _LONG


@dataclass(frozen=True, kw_only=True)
class Proposal:
    """A rule as a card proposes it.

    Attributes:
        effect: ``permit`` (allow similar) or ``forbid`` (forbid similar).
        tool: The request's tool.
        client: The request's client; empty: any client.
        args: The arguments that matter, each a value (equal) or a string pattern with ``*``.
        optional: The argument names the tool does not require (tested with ``has`` first).
        once: Decide one call, then be spent (``@once``).
        reason: Shown when the rule decides.
        call_digest: The whole call's digest, when an argument's name cannot be spelled in a
            rule (the rule then takes the call exactly as sent).
        absent: The tool's arguments the call did not send: a permit tests that they are
            still not sent (``!(context.digests has NAME)``), so a call that adds one asks.
    """

    effect: Literal["permit", "forbid"]
    tool: str
    client: str = ""
    args: Mapping[str, object] | None = None
    optional: Collection[str] = ()
    once: bool = False
    reason: str = ""
    call_digest: str = ""
    absent: Collection[str] = ()


def propose(proposal: Proposal) -> str:
    """The Cedar text of ``proposal`` (what the card shows for the person to edit)."""
    notes = []
    if proposal.reason:
        notes.append(f"@reason({json.dumps(proposal.reason)})")
    if proposal.once:
        notes.append("@once")
    principal = (f"principal == Client::{json.dumps(proposal.client)}" if proposal.client
                 else "principal")
    head = (f"{proposal.effect} ({principal}, action == Action::{json.dumps(proposal.tool)}, "
            f"resource == Tool::{json.dumps(proposal.tool)})")
    tests = [_test(name, value, name in proposal.optional)
             for name, value in sorted((proposal.args or {}).items())]
    if proposal.call_digest:
        tests.append(f"context.args_digest == {json.dumps(proposal.call_digest)}")
    if proposal.effect == "permit":  # a forbid left wider forbids more, never less
        tests += [f"!(context.digests has {name})" for name in sorted(proposal.absent)
                  if plain_name(name)]
    body = f"\nwhen {{ {' && '.join(tests)} }}" if tests else ""
    return "\n".join([*notes, head]) + body + ";"


def _test(name: str, value: object, optional: bool) -> str:
    if not plain_name(name):
        raise ConfigError(f"argument {name!r} cannot be named in a rule (not a plain name)")
    record = "digests" if isinstance(value, Pinned) else "args"
    path = f"context.{record}.{name}"
    if isinstance(value, Pinned):
        test = f"{path} == {json.dumps(value.digest)}"
    elif isinstance(value, str) and "*" in value:
        test = f'{path} like "{_pattern(value)}"'
    elif testable(value):
        test = f"{path} == {json.dumps(value)}"
    else:
        raise ConfigError(f"argument {name!r}: a rule tests a string, a pattern, a whole "
                          "number or true/false, or takes a value exactly as sent (by its "
                          "digest); leave this argument out of the rule")
    return f"context.{record} has {name} && {test}" if optional else test


def _pattern(value: str) -> str:
    """A Cedar ``like`` pattern: ``*`` is the wildcard, everything else is literal."""
    return "*".join(json.dumps(part)[1:-1].replace("*", r"\*") for part in value.split("*"))


def expiry_of(duration: object, *, now: float | None = None) -> tuple[float | None, bool]:
    """(when the rule ends, whether it decides one call) for a duration: ``once``, ``1h``,
    ``8h``, ``24h``, ``revoked`` (until revoked), or ``Ns`` (N seconds).

    Raises:
        ConfigError: another duration.
    """
    moment = time.time() if now is None else now
    text = str(duration)
    if text in DURATIONS:
        seconds = DURATIONS[text]
        return (None if seconds is None else moment + seconds), text == "once"
    short = _SHORT.match(text)
    if short is None or float(short.group(1)) <= 0:
        raise ConfigError(f"rule duration {text!r}: give one of {', '.join(DURATIONS)} "
                          "(or a number of seconds, as 90s)")
    return moment + float(short.group(1)), False


def narrow(text: str, *, tool: str, client: str, shown: Collection[str]) -> str:
    """``text`` (one Cedar policy, stripped) when it is no wider than a decision on a request
    for ``tool`` by ``client`` whose card showed the arguments ``shown``.

    Raises:
        ConfigError: it is not one policy, or it reaches beyond that request (the message says
            what to change).
    """
    written = parse_text(text, "the rule", stored=True)[0]
    est = written.est
    _scope(est, tool=tool, client=client)
    extra = set(_notes(est)) - _ANNOTATIONS
    if extra:
        raise ConfigError(f"the rule carries @{sorted(extra)[0]}: a rule from a decision may "
                          "carry @reason, @once and @ask only")
    conditions = est.get("conditions")
    for condition in conditions if isinstance(conditions, list) else []:
        if isinstance(condition, dict):
            _within(condition.get("body"), shown)
    return text.strip()


def _notes(est: Mapping[str, object]) -> dict[str, object]:
    notes = est.get("annotations")
    return dict(notes) if isinstance(notes, dict) else {}


def _scope(est: Mapping[str, object], *, tool: str, client: str) -> None:
    resource, action, principal = (est.get(k) for k in ("resource", "action", "principal"))
    if _entity(resource) != ("Tool", tool):
        raise ConfigError(f'the rule must name this request\'s tool: resource == Tool::"{tool}" '
                          "(a rule from a decision never reaches another tool)")
    calls = {("Action", tool), ("Action", CALL_TOOL)}
    if _entity(action) not in calls:
        raise ConfigError(f'the rule must be about calling the tool: action == Action::"{tool}"'
                          " (a rule from a decision never covers another action, such as "
                          "decide)")
    if not (isinstance(principal, dict) and principal.get("op") == "All") \
            and _entity(principal) != ("Client", client):
        raise ConfigError(f'the rule\'s principal must be this request\'s client (principal == '
                          f'Client::"{client}") or any client (principal)')


def _entity(scope: object) -> tuple[str, str] | None:
    """``(type, id)`` of a scope ``== ENTITY`` (or ``in ENTITY``, for an action)."""
    if not isinstance(scope, dict) or scope.get("op") not in ("==", "in"):
        return None
    entity = scope.get("entity")
    if not isinstance(entity, dict):
        return None
    kind = entity.get("type", "Action" if "type" not in entity and "id" in entity else None)
    return (str(kind), str(entity.get("id")))


def _within(node: object, shown: Collection[str]) -> None:
    """Refuse any part of a condition that reads more than ``context.args`` of ``shown``."""
    if isinstance(node, list):
        for item in node:
            _within(item, shown)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key in (".", "has") and isinstance(value, dict):
            _reads(value, shown)
        elif key == "Var":
            raise ConfigError(f"the rule's condition reads {value}: a rule from a decision may "
                              "test only the arguments the card showed (context.args.NAME)")
        elif key != "Value":
            _within(value, shown)


def _reads(access: Mapping[str, object], shown: Collection[str]) -> None:
    """An attribute access: fine when it is ``context.args.NAME…`` for a shown NAME (or
    ``context.args has NAME``)."""
    path, node = [str(access.get("attr"))], access.get("left")
    while isinstance(node, dict) and isinstance(node.get("."), dict):
        inner = node["."]
        path.insert(0, str(inner.get("attr")))
        node = inner.get("left")
    if not (isinstance(node, dict) and node.get("Var") == "context"):
        _within(node, shown)  # refuses a variable; an expression's own parts are checked
        raise ConfigError("the rule's condition reads an attribute of something other than "
                          "context.args; test only the arguments the card showed")
    if path == ["args_digest"] or (len(path) == 2 and path[0] == "digests"):
        return  # a digest pins a value exactly as sent: never wider than the request
    if len(path) < 2 or path[0] != "args" or path[1] not in shown:
        named = ".".join(["context", *path])
        raise ConfigError(f"the rule's condition reads {named}: a rule from a decision may "
                          "test only the arguments the card showed ("
                          + ", ".join(f"context.args.{n}" for n in sorted(shown)) + ")")
