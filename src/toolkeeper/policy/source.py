"""Cedar text read into policies: each with its id, where it is written (``FILE:LINE``), whether
it asks and its reason; checked against the schema of the catalog, so a policy that names a
tool, an action or an argument that does not exist is a ``ConfigError`` naming the line and the
nearest name that does.

Cedar's parser reports no positions, so the text is cut into statements here (at each ``;``
outside strings, comments and brackets) and each statement is parsed alone: an error names the
line where its statement starts.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from ..errors import ConfigError
from ..extras import missing
from .decision import Matched

__all__ = ["Written", "check", "nearest", "parse_text", "statements"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Written:
    """One policy as written: its parsed form (Cedar's JSON, ``est``) and what it says of
    itself."""

    matched: Matched
    est: dict[str, object]
    text: str
    expires: float | None = None
    """A stored rule's end (``time.time()``); ``None``: until revoked or edited out."""

    @property
    def id(self) -> str:
        return self.matched.id


def statements(text: str) -> Iterator[tuple[int, str]]:
    """(the line where it starts, the statement with its ``;``) for each policy of ``text``."""
    depth, start, line, start_line, i = 0, None, 1, 1, 0
    while i < len(text):
        char = text[i]
        if char == "\n":
            line += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif start is None and not char.isspace():
            start, start_line = i, line
        if char == '"':
            i = _string_end(text, i)
            continue
        depth += char in "([{"
        depth -= char in ")]}"
        if char == ";" and depth <= 0 and start is not None:
            yield start_line, text[start: i + 1]
            start, depth = None, 0
        i += 1
    if start is not None and text[start:].strip():
        yield start_line, text[start:]


def _string_end(text: str, i: int) -> int:
    """The index after the string literal that starts at ``i``."""
    i += 1
    while i < len(text) and text[i] != '"':
        i += 2 if text[i] == "\\" else 1
    return i + 1


def parse_text(text: str, origin: str, *, stored: bool = False) -> list[Written]:
    """The policies of ``text`` (a file's, or a stored rule's whose id is ``origin``).

    Raises:
        ConfigError: ``ORIGIN:LINE: what is wrong``.
    """
    try:
        import cedarpy
    except ImportError as exc:
        raise missing("policy", "a Cedar policy") from exc
    found = []
    for line, statement in statements(text):
        where = origin if stored else f"{origin}:{line}"
        try:
            parsed = json.loads(cedarpy.policies_to_json_str(statement))
        except ValueError as exc:
            raise ConfigError(f"{where}: not a Cedar policy: {exc}") from None
        policies = list(parsed.get("staticPolicies", {}).values())
        if parsed.get("templates") or len(policies) != 1:
            raise ConfigError(f"{where}: one policy per statement, without template slots "
                              "(?principal, ?resource)")
        found.append(_written(policies[0], statement, where, stored=stored, origin=origin))
    if stored and len(found) != 1:
        raise ConfigError(f"rule {origin}: a stored rule is exactly one policy, got {len(found)}")
    return found


def _written(est: dict[str, object], text: str, where: str, *, stored: bool,
             origin: str) -> Written:
    notes = est.get("annotations") or {}
    assert isinstance(notes, dict)
    effect: Literal["permit", "forbid"] = "forbid" if est.get("effect") == "forbid" else "permit"
    if "ask" in notes and effect == "forbid":
        raise ConfigError(f"{where}: @ask marks a permit that asks a person; a forbid never asks")
    if "once" in notes and not stored:
        raise ConfigError(f"{where}: @once marks a stored rule that decides one call (made "
                          "from a decision, or with toolkeeper policy add); a file's policy "
                          "decides until it is edited out")
    policy_id = origin if stored else str(notes.get("id") or where)
    matched = Matched(id=policy_id, effect=effect, ask="ask" in notes,
                      reason=str(notes.get("reason") or ""), where="store" if stored else where,
                      ttl=_ttl(notes, where), once="once" in notes)
    return Written(matched=matched, est=est, text=text)


def _ttl(notes: dict[str, object], where: str) -> float | Literal["never"] | None:
    """An asking permit's ``@ttl("900")`` or ``@ttl("never")``."""
    if "ttl" not in notes:
        return None
    value = str(notes["ttl"]).strip()
    if "ask" not in notes:
        raise ConfigError(f"{where}: @ttl says how long an @ask permit's request stays "
                          "approvable; add @ask, or remove @ttl")
    if value == "never":
        return "never"
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not seconds > 0 or seconds == float("inf"):
        raise ConfigError(f'{where}: @ttl("{value}") must be seconds above 0 (@ttl("900")) '
                          'or @ttl("never")')
    return seconds


def nearest(name: str, known: Iterable[str]) -> str:
    """``; did you mean 'X'?`` for the closest of ``known``, or nothing."""
    names = list(known)
    prefixed = sorted((k for k in names if k and (name.startswith(k) or k.startswith(name))),
                      key=len, reverse=True)  # 'env' for 'environment', 'path' for 'paths'
    close = prefixed[:1] or difflib.get_close_matches(name, names, n=1, cutoff=0.4)
    return f"; did you mean '{close[0]}'?" if close else ""


_ATTRIBUTE = re.compile(r"attribute `args\.([^`]+)` in context for Action::\"([^\"]+)\" not found")
_OPTIONAL = re.compile(r"optional attribute `args\.([^`]+)`")
_ACTION = re.compile(r"unrecognized action `Action::\"([^\"]+)\"`")


def check(policies: list[Written], schema: object, tools: Mapping[str, frozenset[str]],
          awaiting: frozenset[str] = frozenset()) -> None:
    """Validate ``policies`` against ``schema`` (a ``cedarpy.Schema``) and the catalog
    (``tools``: name → its argument names). A policy naming a tool or action ``NAME-…`` that
    is not in the catalog yet, where ``NAME`` is one of ``awaiting`` (upstream MCP servers whose
    tools have not been listed yet), is checked once they are: until then it is taken as written.

    Raises:
        ConfigError: the first policy that names what does not exist, or does not type-check.
    """
    import cedarpy

    later = {i for i, p in enumerate(policies) if _awaited(p, tools, awaiting)}
    for index, policy in enumerate(policies):
        if index not in later:
            _known_tools(policy, tools)
        _enforced(policy)
    if not policies:
        return
    text = "\n".join(p.text for p in policies)
    result = cedarpy.validate_policies(text, schema)  # type: ignore[arg-type]
    for error in result.errors:
        index = int(error.policy_id.removeprefix("policy") or 0)
        if index not in later:
            raise ConfigError(f"{policies[index].matched.where}: "
                              f"{_explained(error.error, tools)}")


def _awaited(policy: Written, tools: Mapping[str, frozenset[str]],
             awaiting: frozenset[str]) -> bool:
    """Whether ``policy`` names a tool or action of an upstream whose tools are not listed yet."""
    return any(kind in ("Tool", "Action") and name not in tools and "-" in name
               and name.split("-", 1)[0] in awaiting for kind, name in _entities(policy.est))


def _explained(error: str, tools: Mapping[str, frozenset[str]]) -> str:
    attribute = _ATTRIBUTE.search(error)
    if attribute is not None:
        arg, tool = attribute.groups()
        known = sorted(tools.get(tool, ()))
        return (f"tool '{tool}' has no argument '{arg}' that a policy can read"
                f"{nearest(arg, known)} (its arguments: {', '.join(known) or 'none'})")
    optional = _OPTIONAL.search(error)
    if optional is not None:
        arg = optional.group(1)
        return (f"argument '{arg}' is optional: test it first (context.args has {arg} && …) "
                f"({error})")
    action = _ACTION.search(error)
    if action is not None:
        return f"no tool or action '{action.group(1)}'{nearest(action.group(1), tools)}"
    return error


def _entities(node: object) -> Iterator[tuple[str, str]]:
    """Every entity literal (type, id) in a policy's JSON."""
    if isinstance(node, dict):
        if isinstance(node.get("type"), str) and isinstance(node.get("id"), str):
            yield str(node["type"]), str(node["id"])
        for value in node.values():
            yield from _entities(value)
    elif isinstance(node, list):
        for value in node:
            yield from _entities(value)


def _known_tools(policy: Written, tools: Mapping[str, frozenset[str]]) -> None:
    for kind, name in _entities(policy.est):
        if kind == "Tool" and name not in tools:
            raise ConfigError(f"{policy.matched.where}: no tool '{name}' in the catalog"
                              f"{nearest(name, tools)}")


_NEVER_ASKED = ("read_resource", "get_prompt")


def _enforced(policy: Written) -> None:
    """An ``@ask`` naming a read (a resource, a prompt) is refused, never loaded to do
    nothing: a person is asked only about tool calls — a read is allowed or forbidden."""
    if not policy.matched.ask:
        return
    for kind, name in _entities(policy.est.get("action")):
        if kind == "Action" and name in _NEVER_ASKED:
            raise ConfigError(
                f"{policy.matched.where}: @ask on {name}: a person is never asked about "
                "reading a resource or getting a prompt; write a permit (served) or a forbid "
                "(refused) instead, or ask about the tools that reach the data")
