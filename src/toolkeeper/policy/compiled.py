"""A checked policy set, indexed by tool: each tool is evaluated against only the policies
whose scope can name it (its own action or ``call_tool``, its own resource or any), built into a
Cedar policy set the first time it is called and kept until the set changes. Cedar evaluates
every policy of a set on each request, so the index is what keeps a call's check small when a
team has a thousand rules.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..core.context import Caller
from ..core.spec import ToolLike
from .decision import Matched
from .schema import (
    CALL_TOOL,
    DECIDE,
    CedarType,
    cedar_args,
    client_entity,
    digests_of,
    offer_entity,
    request_context,
    tool_entity,
    value_digest,
)
from .source import Written

__all__ = ["CompiledSet", "Verdict"]

_MAX_ENTITIES = 4096


@dataclass(frozen=True, kw_only=True, slots=True)
class Verdict:
    """What the operator's policies said of one request (the default set joins it later)."""

    permits: tuple[Matched, ...] = ()
    forbids: tuple[Matched, ...] = ()
    failed_forbids: tuple[str, ...] = ()
    expired: bool = False
    """A stored rule past its end took part: the set must be rebuilt and asked again."""


@dataclass(slots=True)
class _ToolSet:
    policies: object  # cedarpy.PolicySet
    written: Mapping[str, Written]
    digests: bool = False
    """Some policy reads the arguments' digests (only then are they computed: a large
    argument costs its hashing)."""


@dataclass(kw_only=True)
class CompiledSet:
    """The operator's policies (files and stored rules), checked, with the argument types of
    the catalog they were checked against."""

    policies: Sequence[Written]
    args: Mapping[str, CedarType]
    decide_args: CedarType = field(default_factory=lambda: {"type": "Record", "attributes": {}})
    """The type of ``decide``'s ``context.args`` (see ``schema.decide_args_type``)."""
    next_expiry: float = float("inf")
    _by_tool: dict[tuple[str, bool], _ToolSet | None] = field(default_factory=dict)
    _entities: dict[tuple[str, ...], object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        ends = [p.expires for p in self.policies if p.expires is not None]
        self.next_expiry = min(ends, default=float("inf"))

    def for_tool(self, name: str, *, deciding: bool = False) -> _ToolSet | None:
        """The policies that can apply to calls of ``name`` (``deciding``: to decisions on
        requests for it) — ``None``: none can."""
        key = (name, deciding)
        if key in self._by_tool:
            return self._by_tool[key]
        chosen = {p.id: p for p in self.policies if _applies(p.est, name, deciding=deciding)}
        built = _tool_set(chosen)
        self._by_tool[key] = built
        return built

    def for_offer(self, action: str) -> _ToolSet | None:
        """The policies that can apply to ``action`` (``read_resource``, ``get_prompt``)."""
        key = (action, True)  # no tool has an action's name, and only DECIDE is "deciding"
        if key not in self._by_tool:
            self._by_tool[key] = _tool_set({p.id: p for p in self.policies
                                            if _names_action(p.est, (action,))})
        return self._by_tool[key]

    def evaluate_offer(self, action: str, name: str, caller: Caller, *, server: str = "",
                       protocol: str = "", era: str = "", workspace: str = "") -> Verdict:
        """Cedar's answer for ``caller`` reading the resource ``name`` (a URI) or getting
        the prompt ``name`` (``action``), relayed from the upstream ``server`` if any."""
        chosen = self.for_offer(action)
        if chosen is None:
            return Verdict()
        import cedarpy

        entity = offer_entity(action, name, server)
        request = {"principal": {"type": "Client", "id": caller.client},
                   "action": {"type": "Action", "id": action}, "resource": entity["uid"],
                   "context": request_context({}, code_mode=caller.channel == "code_mode",
                                              protocol=protocol, era=era,
                                              workspace=workspace)}
        entities = cedarpy.Entities.from_json_str(json.dumps([
            client_entity(caller), entity,
            {"uid": {"type": "Action", "id": action}, "attrs": {}, "parents": []}]))
        answer = cedarpy.is_authorized(request, chosen.policies,  # type: ignore[arg-type]
                                       entities)
        return _verdict(answer, chosen.written)

    def evaluate(self, tool: ToolLike, caller: Caller, arguments: object, *, code_mode: bool,
                 protocol: str = "", era: str = "", workspace: str = "") -> Verdict:
        """Cedar's answer for a call of ``tool`` by ``caller`` with ``arguments``."""
        name = tool.qualified_name
        chosen = self.for_tool(name)
        if chosen is None:
            return Verdict()
        import cedarpy

        kind = self.args.get(name, {"type": "Record", "attributes": {}})
        digests = chosen.digests
        context = request_context(cedar_args(arguments, kind) or {},
                                  code_mode=code_mode, protocol=protocol, era=era,
                                  workspace=workspace,
                                  digests=digests_of(arguments) if digests else None,
                                  args_digest=value_digest(arguments) if digests else "")
        request = {"principal": {"type": "Client", "id": caller.client},
                   "action": {"type": "Action", "id": name},
                   "resource": {"type": "Tool", "id": name}, "context": context}
        answer = cedarpy.is_authorized(request, chosen.policies,  # type: ignore[arg-type]
                                       self._entities_for(caller, tool))  # type: ignore[arg-type]
        return _verdict(answer, chosen.written)

    def evaluate_decide(self, operator: dict[str, object], tool: dict[str, object],
                        context: dict[str, object]) -> Verdict:
        """Cedar's answer for ``operator`` (an ``Operator`` entity) deciding a request for
        ``tool`` (its ``Tool`` entity), the request as ``context``."""
        uid = tool["uid"]
        assert isinstance(uid, dict)
        chosen = self.for_tool(str(uid["id"]), deciding=True)
        if chosen is None:
            return Verdict()
        import cedarpy

        request = {"principal": operator["uid"], "action": {"type": "Action", "id": DECIDE},
                   "resource": uid, "context": context}
        entities = cedarpy.Entities.from_json_str(json.dumps([
            operator, tool, {"uid": {"type": "Action", "id": DECIDE}, "attrs": {},
                             "parents": []}]))
        answer = cedarpy.is_authorized(request, chosen.policies,  # type: ignore[arg-type]
                                       entities)
        return _verdict(answer, chosen.written)

    def _entities_for(self, caller: Caller, tool: ToolLike) -> object:
        key = (caller.client, caller.channel, caller.via, caller.subject,
               ",".join(caller.scopes), tool.qualified_name)
        found = self._entities.get(key)
        if found is None:
            import cedarpy

            if len(self._entities) >= _MAX_ENTITIES:
                self._entities.clear()
            name = tool.qualified_name
            found = self._entities[key] = cedarpy.Entities.from_json_str(json.dumps([
                client_entity(caller), tool_entity(tool),
                {"uid": {"type": "Action", "id": name}, "attrs": {},
                 "parents": [{"type": "Action", "id": CALL_TOOL}]},
                {"uid": {"type": "Action", "id": CALL_TOOL}, "attrs": {}, "parents": []}]))
        return found


def _tool_set(chosen: dict[str, Written]) -> _ToolSet | None:
    """``chosen`` as one Cedar policy set (``None`` when there is none)."""
    if not chosen:
        return None
    import cedarpy

    document = {"staticPolicies": {k: p.est for k, p in chosen.items()},
                "templates": {}, "templateLinks": []}
    return _ToolSet(cedarpy.PolicySet.from_json_str(json.dumps(document)), chosen,
                    digests=any("digest" in json.dumps(p.est) for p in chosen.values()))


def _verdict(answer: object, written: Mapping[str, Written]) -> Verdict:
    import cedarpy

    assert isinstance(answer, cedarpy.AuthzResult)
    now = time.time()
    reasons = [written[r] for r in answer.diagnostics.reasons if r in written]
    expired = any(p.expires is not None and p.expires <= now for p in reasons)
    failed = []
    for error in answer.diagnostics.errors:
        start = error.find("policy `")
        policy = written.get(error[start + 8: error.find("`", start + 8)]) if start >= 0 else None
        if policy is None or policy.matched.effect == "forbid":
            failed.append(error)
    matched = tuple(p.matched for p in reasons)
    if answer.allowed:
        return Verdict(permits=matched, failed_forbids=tuple(failed), expired=expired)
    return Verdict(forbids=matched, failed_forbids=tuple(failed), expired=expired)


def _names(scope: Mapping[str, object]) -> list[tuple[str, str]]:
    """The entities a scope constraint names (``==`` or ``in`` one, ``in`` a list)."""
    out = []
    for key in ("entity", "entities"):
        value = scope.get(key)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, dict):
                out.append((str(item.get("type")), str(item.get("id"))))
    inner = scope.get("in")
    if isinstance(inner, dict):
        out += _names(inner)
    return out


def _names_action(est: Mapping[str, object], actions: tuple[str, ...]) -> bool:
    """Whether a policy's action scope is open or names one of ``actions``."""
    action = est.get("action")
    return not (isinstance(action, dict) and action.get("op") in ("==", "in") and not any(
        kind == "Action" and name in actions for kind, name in _names(action)))


def _applies(est: Mapping[str, object], tool: str, *, deciding: bool = False) -> bool:
    """Whether a policy's scope can match a call of ``tool`` (``deciding``: a decision on a
    request for it) — when unsure: yes."""
    resource = est.get("resource")
    if not _names_action(est, (DECIDE,) if deciding else (tool, CALL_TOOL)):
        return False
    if isinstance(resource, dict) and resource.get("op") in ("==", "in", "is"):
        if resource.get("op") == "is" and resource.get("entity_type") != "Tool":
            return False
        named = _names(resource)
        if named and not any(kind == "Tool" and name == tool for kind, name in named):
            return False
    return True
