"""The Cedar schema generated from the catalog, and each call as a Cedar request.

Principal: ``Client::"NAME"`` (the caller: its client's name, the door it came through, how it
proved itself, its OAuth subject and scopes, whether it is a code-mode run). Action: one per
tool, named as the tool, each a member of ``Action::"call_tool"``; ``read_resource``,
``get_prompt`` and ``decide``. Resource: ``Tool::"NAME"`` with its attributes (a read's
``Resource::"URI"``, a prompt's ``Prompt::"NAME"``). Context: ``args`` typed from the tool's
input schema, ``digests`` (each argument sent, by name, as the SHA-256 of its canonical JSON — what
a rule tests of a value Cedar cannot hold as sent: an object, a list, a decimal), ``args_digest``
(the same of the whole call), ``code_mode``, the time (``now``, ``hour``, ``weekday``, UTC), the MCP revision
the request speaks (``protocol``) and its ``era`` (``handshake``, ``per-request``; empty outside
MCP) and the ``workspace``.

Deciding an approval request is itself a request: principal ``Operator::"NAME"`` (the person),
action ``decide``, resource the request's ``Tool`` (its attributes), context the request as its
card shows it — ``client``, ``risk``, ``reason``, the time and ``args``. One action serves every
tool, so its ``args`` holds each argument name that has one type in every tool that has it
(optional: a policy tests ``context.args has NAME`` first); a name typed differently by two
tools is left out.

JSON Schema maps to Cedar as: string → String, integer → Long, boolean → Bool, array → Set,
object with properties → Record (required properties required). What Cedar cannot hold (numbers
with fractions, unions, free-form objects) is left out of ``context.args``; a policy that names
such an argument fails validation, so it never silently reads nothing.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Mapping
from typing import Final

from ..core.context import Caller
from ..core.json import JsonObject, JsonValue
from ..core.spec import ToolLike
from ..errors import ConfigError

__all__ = ["ACTIONS", "CALL_TOOL", "DECIDE", "CedarType", "args_type", "cedar_args",
           "cedar_schema", "client_entity", "decide_args_type", "decide_context", "digests_of",
           "digests_type", "offer_entity", "operator_entity", "request_context", "tool_entity",
           "value_digest"]

CALL_TOOL: Final = "call_tool"
DECIDE: Final = "decide"
READ_RESOURCE: Final = "read_resource"
GET_PROMPT: Final = "get_prompt"
ACTIONS: Final = (CALL_TOOL, READ_RESOURCE, GET_PROMPT, DECIDE)
"""The actions that are not a tool's own (a tool of one of these names cannot be governed)."""

CedarType = dict[str, object]
_MAX_DEPTH = 8
_LONG = 2**63

_STRING: CedarType = {"type": "String"}
_LONG_T: CedarType = {"type": "Long"}
_BOOL: CedarType = {"type": "Boolean"}
_TAGS: CedarType = {"type": "Set", "element": _STRING}


def _record(attributes: Mapping[str, CedarType]) -> CedarType:
    return {"type": "Record", "attributes": dict(attributes)}


CLIENT_SHAPE = _record({"name": _STRING, "channel": _STRING, "via": _STRING,
                        "subject": _STRING, "scopes": _TAGS, "code_mode": _BOOL})
OPERATOR_SHAPE = _record({"name": _STRING, "via": _STRING, "scopes": _TAGS})
OFFER_SHAPES: Final = {READ_RESOURCE: ("Resource", _record({"uri": _STRING, "server": _STRING})),
                       GET_PROMPT: ("Prompt", _record({"name": _STRING, "server": _STRING}))}
"""The entity type and shape of what ``read_resource`` and ``get_prompt`` name."""
TOOL_SHAPE = _record({
    "name": _STRING, "namespace": _STRING, "server": _STRING, "kind": _STRING,
    "risk": _STRING, "level": _LONG_T, "asks": _BOOL, "hitl_mode": _STRING, "tags": _TAGS,
    "read_only": _BOOL, "destructive": _BOOL, "idempotent": _BOOL, "open_world": _BOOL})


def _resolve(node: JsonValue, root: JsonObject) -> JsonValue:
    """A local ``$ref`` (``#/$defs/X``) resolved inside the document; never fetched."""
    if isinstance(node, dict) and isinstance(node.get("$ref"), str):
        ref = str(node["$ref"])
        target: JsonValue = root
        for part in ref.removeprefix("#/").split("/") if ref.startswith("#/") else ["\0"]:
            target = target.get(part) if isinstance(target, dict) else None
        return target
    return node


def _nullable(kinds: object) -> object:
    """``["string", "null"]`` → ``"string"``; other lists stay unions."""
    if isinstance(kinds, list) and len(kinds) == 2 and "null" in kinds:
        return next(k for k in kinds if k != "null")
    return kinds


def _cedar_type(node: JsonValue, root: JsonObject, depth: int = 0) -> CedarType | None:
    """The Cedar type of a JSON Schema, or ``None`` when Cedar cannot hold it."""
    node = _resolve(node, root)
    if not isinstance(node, dict) or depth > _MAX_DEPTH:
        return None
    kind = _nullable(node.get("type"))
    simple = {"string": _STRING, "integer": _LONG_T, "boolean": _BOOL}
    if isinstance(kind, str) and kind in simple:
        return simple[kind]
    if kind == "array":
        element = _cedar_type(node.get("items"), root, depth + 1)
        return None if element is None else {"type": "Set", "element": element}
    if kind == "object" or (kind is None and "properties" in node):
        return _object_type(node, root, depth)
    return None


def _object_type(node: JsonObject, root: JsonObject, depth: int) -> CedarType | None:
    properties = node.get("properties")
    if not isinstance(properties, dict) or not properties:
        return None
    required = node.get("required")
    needed = set(required) if isinstance(required, list) else set()
    attributes: dict[str, CedarType] = {}
    for name, sub in properties.items():
        typed = _cedar_type(sub, root, depth + 1)
        if typed is not None:
            attributes[name] = typed if name in needed else {**typed, "required": False}
    return _record(attributes)


def args_type(tool: ToolLike) -> CedarType:
    """The Cedar record type of ``tool``'s arguments (what Cedar can hold of them): the
    required ones required (the arguments are validated before the policies are asked), the
    others optional (a policy tests ``context.args has NAME`` first)."""
    schema = tool.get_schema("mcp")
    params = schema.get("inputSchema", schema.get("parameters"))
    root = params if isinstance(params, dict) else {}
    typed = _object_type(root, root, 0) if root else None
    return typed if typed is not None else _record({})


def digests_type(tool: ToolLike) -> CedarType:
    """The record of a call's ``context.digests``: one string per argument of ``tool``'s input
    schema, whatever its type (required when the argument is)."""
    schema = tool.get_schema("mcp")
    params = schema.get("inputSchema", schema.get("parameters"))
    properties = params.get("properties") if isinstance(params, dict) else None
    required = params.get("required") if isinstance(params, dict) else None
    needed = set(required) if isinstance(required, list) else set()
    return _record({name: _STRING if name in needed else {**_STRING, "required": False}
                    for name in (properties if isinstance(properties, dict) else {})})


def value_digest(value: object) -> str:
    """The SHA-256 (hex) of ``value``'s canonical JSON (sorted keys, no spaces): how a rule
    pins an argument it cannot test as sent."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def digests_of(arguments: object) -> dict[str, str]:
    """``context.digests`` of a call: each argument's ``value_digest``."""
    items = arguments.items() if isinstance(arguments, Mapping) else ()
    return {str(name): value_digest(value) for name, value in items}


def _context_type(args: CedarType, digests: CedarType | None = None) -> CedarType:
    return _record({"args": args, "digests": digests or _record({}), "args_digest": _STRING,
                    "code_mode": _BOOL, "now": _LONG_T, "hour": _LONG_T, "weekday": _LONG_T,
                    "protocol": _STRING, "era": _STRING, "workspace": _STRING})


def decide_args_type(tools: Iterable[ToolLike]) -> CedarType:
    """The record of ``decide``'s ``context.args``: each argument name that has the same Cedar
    type in every tool that has it, optional (a name typed differently is left out)."""
    found: dict[str, CedarType] = {}
    clashing: set[str] = set()
    for tool in tools:
        attributes = args_type(tool).get("attributes")
        assert isinstance(attributes, dict)
        for name, kind in attributes.items():
            typed = {k: v for k, v in kind.items() if k != "required"}
            if name in found and found[name] != typed:
                clashing.add(name)
            found.setdefault(name, typed)
    return _record({name: {**kind, "required": False} for name, kind in sorted(found.items())
                    if name not in clashing})


def _decide_context_type(args: CedarType) -> CedarType:
    return _record({"args": args, "client": _STRING, "risk": _STRING, "reason": _STRING,
                    "now": _LONG_T, "hour": _LONG_T, "weekday": _LONG_T})


def cedar_schema(tools: Iterable[ToolLike]) -> dict[str, object]:
    """The Cedar schema (JSON form) for a catalog: one action per tool, typed context, and
    ``decide`` (an operator deciding a request for a tool)."""
    tools = list(tools)
    applies: dict[str, object] = {"principalTypes": ["Client"], "resourceTypes": ["Tool"]}
    actions: dict[str, object] = {
        CALL_TOOL: {},
        **{action: {"appliesTo": {"principalTypes": ["Client"], "resourceTypes": [kind],
                                  "context": _context_type(_record({}))}}
           for action, (kind, _) in OFFER_SHAPES.items()},
        DECIDE: {"appliesTo": {"principalTypes": ["Operator"], "resourceTypes": ["Tool"],
                               "context": _decide_context_type(decide_args_type(tools))}},
    }
    for tool in tools:
        name = tool.qualified_name
        if name in ACTIONS:
            raise ConfigError(f"a tool named {name!r} cannot be governed by Cedar policies: the "
                              f"action of that name is reserved ({', '.join(ACTIONS)}); rename it")
        applies_to: dict[str, object] = {**applies, "context": _context_type(
            args_type(tool), digests_type(tool))}
        actions[name] = {"memberOf": [{"id": CALL_TOOL}], "appliesTo": applies_to}
    return {"": {"entityTypes": {
        "Client": {"shape": CLIENT_SHAPE}, "Operator": {"shape": OPERATOR_SHAPE},
        "Tool": {"shape": TOOL_SHAPE},
        **{kind: {"shape": shape} for kind, shape in OFFER_SHAPES.values()},
    }, "actions": actions}}


def cedar_args(value: object, kind: CedarType) -> object:
    """``value`` as a Cedar JSON value of type ``kind``; ``None`` when it does not fit (the
    attribute is then left out: a policy reading it fails, and a failed forbid denies)."""
    tag = kind.get("type")
    if tag == "String":
        return value if isinstance(value, str) else None
    if tag == "Boolean":
        return value if isinstance(value, bool) else None
    if tag == "Long":
        fits = isinstance(value, int) and not isinstance(value, bool) and -_LONG <= value < _LONG
        return value if fits else None
    if tag == "Set":
        element = kind.get("element")
        if not isinstance(value, list) or not isinstance(element, dict):
            return None
        items = [cedar_args(v, element) for v in value]
        return None if any(i is None for i in items) else items
    if tag == "Record" and isinstance(value, dict):
        attributes = kind.get("attributes")
        assert isinstance(attributes, dict)
        out = {}
        for name, sub in attributes.items():
            if name in value:
                converted = cedar_args(value[name], sub)
                if converted is not None:
                    out[name] = converted
        return out
    return None


def client_entity(caller: Caller) -> dict[str, object]:
    """The principal: ``Client::"NAME"`` and what the caller says of itself."""
    return {"uid": {"type": "Client", "id": caller.client}, "parents": [], "attrs": {
        "name": caller.client, "channel": caller.channel, "via": caller.via,
        "subject": caller.subject, "scopes": sorted(caller.scopes),
        "code_mode": caller.channel == "code_mode"}}


def operator_entity(name: str, via: str = "", scopes: Iterable[str] = ()) -> dict[str, object]:
    """The principal of ``decide``: ``Operator::"NAME"`` (the person deciding), how they
    proved it (``bearer``, ``cookie``) and their OAuth access token's scopes (none for a token
    of the state dir)."""
    return {"uid": {"type": "Operator", "id": name}, "parents": [],
            "attrs": {"name": name, "via": via, "scopes": sorted(scopes)}}


def offer_entity(action: str, name: str, server: str = "") -> dict[str, object]:
    """The resource of ``read_resource`` (``Resource::"URI"``) or ``get_prompt``
    (``Prompt::"NAME"``); ``server``: the upstream MCP server the gateway relays it from."""
    kind, _ = OFFER_SHAPES[action]
    key = "uri" if kind == "Resource" else "name"
    return {"uid": {"type": kind, "id": name}, "parents": [],
            "attrs": {key: name, "server": server}}


def tool_entity(tool: ToolLike) -> dict[str, object]:
    """The resource: ``Tool::"NAME"`` with its attributes (a hint the tool does not give is
    false)."""
    meta = tool.metadata
    return {"uid": {"type": "Tool", "id": tool.qualified_name}, "parents": [], "attrs": {
        "name": tool.name, "namespace": tool.namespace or "",
        "server": (tool.namespace or "") if meta.source == "mcp" else "",
        "kind": tool.kind, "risk": tool.risk.value, "level": tool.risk.rank,
        "asks": tool.hitl_explicit and tool.hitl_mode.value != "none",
        "hitl_mode": tool.hitl_mode.value, "tags": sorted(meta.tags | meta.custom_tags),
        "read_only": bool(meta.read_only_hint), "destructive": bool(meta.destructive_hint),
        "idempotent": bool(meta.idempotent_hint), "open_world": bool(meta.open_world_hint)}}


def request_context(args: object, *, code_mode: bool, protocol: str = "", era: str = "",
                    workspace: str = "", now: float | None = None,
                    digests: Mapping[str, str] | None = None, args_digest: str = ""
                    ) -> dict[str, object]:
    """The context of one call (``args`` already converted by ``cedar_args``; ``digests`` and
    ``args_digest`` as ``digests_of`` and ``value_digest`` make them)."""
    stamp = time.time() if now is None else now
    moment = time.gmtime(stamp)
    return {"args": args, "digests": dict(digests or {}), "args_digest": args_digest,
            "code_mode": code_mode, "now": int(stamp), "hour": moment.tm_hour,
            "weekday": moment.tm_wday, "protocol": protocol, "era": era,
            "workspace": workspace}


def decide_context(args: object, *, client: str, risk: str, reason: str,
                   now: float | None = None) -> dict[str, object]:
    """The context of one ``decide`` request (``args`` already converted by ``cedar_args``)."""
    stamp = time.time() if now is None else now
    moment = time.gmtime(stamp)
    return {"args": args, "client": client, "risk": risk, "reason": reason, "now": int(stamp),
            "hour": moment.tm_hour, "weekday": moment.tm_wday}
