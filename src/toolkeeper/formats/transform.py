"""Schema transformers: project a tool's JSON Schema onto what one provider accepts.

A transformer never changes what the tool validates — toolkeeper validates every call against the
tool's own schema — it only changes what the provider is shown. Where a keyword cannot be shown
but its meaning can be kept (a constraint the provider ignores is still enforced on the call),
it moves into the description (an ``info`` problem). Where meaning is lost, a ``warning``. Where a
requested mode (strict) cannot be honoured, an ``error`` — and the declaration falls back to a
form the provider accepts.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from ..core.json import JsonObject, JsonValue
from ..core.results import dump_json
from .argnames import ArgumentRule
from .problems import Problem

__all__ = ["Profile", "SchemaTransformer", "StrictImpossible", "inline_refs"]

Severity = Literal["error", "warning", "info"]
_CHILD_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


class StrictImpossible(Exception):
    """Raised inside a strict transform when the schema cannot be made strict."""


@dataclass(frozen=True)
class Profile:
    """What a provider accepts in a tool's parameter schema.

    Attributes:
        name: The API format.
        keep: Keywords the provider accepts (None: accepts anything).
        describe: Keywords the provider rejects whose meaning is kept by moving them into the
            description (toolkeeper still enforces them when the call comes back).
        strict_keep: Keywords accepted in strict mode (None: strict unsupported).
        strict_all_required: Strict mode needs every property required (optional → nullable).
        openapi_subset: Gemini's OpenAPI 3.0 dialect (nullable, string enums, no maps/refs).
        refs: ``$ref``/``$defs`` are accepted (used only for recursive schemas).
        as_is: The provider's dialect is JSON Schema 2020-12 itself (MCP): a schema is sent as
            written — ``$schema``, ``$defs`` and ``$ref`` kept — unless strict mode asks more.
    """

    name: str
    keep: frozenset[str] | None = None
    describe: frozenset[str] = frozenset()
    strict_keep: frozenset[str] | None = None
    strict_all_required: bool = True
    openapi_subset: bool = False
    refs: bool = True
    as_is: bool = False
    argument_names: ArgumentRule | None = None


_CONSTRAINTS = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength",
     "maxLength", "pattern", "format", "minItems", "maxItems", "uniqueItems", "minProperties",
     "maxProperties", "contains", "minContains", "maxContains", "patternProperties",
     "propertyNames", "dependentRequired", "examples", "not", "if", "then", "else",
     "prefixItems", "unevaluatedProperties", "unevaluatedItems", "const", "default",
     "contentEncoding", "contentMediaType", "deprecated", "readOnly", "writeOnly"}
)


_OPENAPI_FORMATS: dict[JsonValue, tuple[str, ...]] = {
    "string": ("enum", "date-time"),
    "number": ("float", "double"),
    "integer": ("int32", "int64"),
}


def inline_refs(schema: JsonObject) -> tuple[JsonObject, bool]:
    """Replace local ``$ref``s by their definitions; returns (schema, is_recursive).

    Recursive references are left in place (with ``$defs`` kept) and reported as recursive.
    """
    defs = {**_object(schema.get("definitions")), **_object(schema.get("$defs"))}
    if not defs:
        return schema, False
    recursive = False

    def resolve(node: JsonValue, trail: tuple[str, ...]) -> JsonValue:
        nonlocal recursive
        if isinstance(node, list):
            return [resolve(item, trail) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")):
            key = ref.rsplit("/", 1)[-1]
            if key in trail or key not in defs:
                recursive = recursive or key in trail
                return node
            target = _object(resolve(defs[key], (*trail, key)))
            siblings = {k: resolve(v, trail) for k, v in node.items() if k != "$ref"}
            return {**target, **siblings}
        return {k: resolve(v, trail) if k not in ("$defs", "definitions") else v
                for k, v in node.items()}

    out = _object(resolve(schema, ()))
    if not recursive:
        out.pop("$defs", None)
        out.pop("definitions", None)
    return out, recursive


@dataclass
class SchemaTransformer:
    """One transformation of one tool's schema for one profile; collects problems."""

    profile: Profile
    tool: str
    strict: bool = False
    renames: Mapping[str, str] = field(default_factory=dict)
    """Property names the provider does not take → the names it is shown instead."""
    problems: list[Problem] = field(default_factory=list)

    def note(self, severity: Severity, path: str, message: str) -> None:
        self.problems.append(Problem(severity=severity, api_format=self.profile.name,
                                     tool=self.tool, path=path, message=message))

    def transform(self, schema: JsonObject) -> JsonObject:
        """The schema as this profile shows it (a new dict; the input is not changed)."""
        inlined, recursive = inline_refs(copy.deepcopy(schema))
        if recursive and (not self.profile.refs or self.strict):
            if self.strict:
                raise StrictImpossible("the schema is recursive")
            self.note("warning", "parameters", "recursive schema cannot be inlined; the "
                      "recursive part is shown as a plain object")
            inlined = _object(_cut_refs(inlined))
        node = self._node(inlined, "parameters")
        node.setdefault("type", "object")
        if node.get("type") == "object":
            node.setdefault("properties", {})
        return node

    # -- one schema node --------------------------------------------------------------

    def _node(self, node: JsonValue, path: str) -> JsonObject:
        if not isinstance(node, dict):
            return {}
        if self.profile.openapi_subset:
            node = self._openapi(node, path)
        out: JsonObject = {}
        notes: list[str] = []
        keep = self._keep()
        for key, value in node.items():
            if key == "$schema":
                continue  # the dialect is the provider's; no provider wants the meta key
            if key == "properties" and isinstance(value, dict):
                out[key] = self._properties(value, path)
            elif key in ("required", "propertyOrdering") and isinstance(value, list) \
                    and self.renames and self._kept(key, keep):
                out[key] = [self.renames.get(n, n) if isinstance(n, str) else n for n in value]
            elif key in _CHILD_LISTS and isinstance(value, list) and self._kept(key, keep):
                out[key] = [self._node(s, f"{path}.{key}[{i}]") for i, s in enumerate(value)]
            elif key in ("items", "additionalProperties") and isinstance(value, dict):
                if self._kept(key, keep):
                    out[key] = self._node(value, f"{path}.{key}")
                else:
                    self._drop(key, value, path, notes)
            elif self._kept(key, keep):
                out[key] = value
            else:
                self._drop(key, value, path, notes)
        if self.strict:
            out = self._strictify(out, path, notes)
        if notes:
            out["description"] = " ".join([_text(out.get("description")), *notes]).strip()
        return out

    def _properties(self, properties: JsonObject, path: str) -> JsonObject:
        shown: JsonObject = {}
        for name, sub in properties.items():
            node = self._node(sub, f"{path}.{name}")
            wire = self.renames.get(name)
            if wire is not None:
                node["description"] = f"{_text(node.get('description'))} Argument '{name}'.".strip()
                rule = self.profile.argument_names
                takes = f" ({rule.summary})" if rule is not None else ""
                self.note("warning", f"{path}.{name}", f"argument name '{name}' is not accepted"
                          f"{takes}; sent as '{wire}' and mapped back when the call comes back")
            shown[wire or name] = node
        return shown

    def _keep(self) -> frozenset[str] | None:
        return self.profile.strict_keep if self.strict else self.profile.keep

    @staticmethod
    def _kept(key: str, keep: frozenset[str] | None) -> bool:
        return keep is None or key in keep

    def _drop(self, key: str, value: JsonValue, path: str, notes: list[str]) -> None:
        if key in ("title", "$schema", "$id", "$comment", "$defs", "definitions"):
            return
        if key == "default":
            notes.append(f"Default: {_short_json(value)}.")
            self.note("info", path, "default moved into the description")
            return
        if self.strict and key in ("oneOf", "allOf"):
            raise StrictImpossible(f"'{key}' at {path} has no strict-mode equivalent")
        if key in _CONSTRAINTS or key in self.profile.describe:
            notes.append(f"Constraint: {key} {_short_json(value)}.")
            self.note("info", path, f"'{key}' is not accepted; moved into the description "
                      "(still enforced when the call comes back)")
            return
        if key == "additionalProperties" and isinstance(value, bool):
            if value:
                notes.append("Accepts any keys.")
            return
        if key == "additionalProperties":
            if self.strict:
                _refuse_open_object({"additionalProperties": value}, path)
            notes.append(f"Keys map to values of schema {_short_json(value)}.")
            self.note("warning", path, "map values ('additionalProperties') cannot be declared; "
                      "described in words instead")
            return
        self.note("warning", path, f"keyword '{key}' is not accepted and was dropped")

    # -- strict mode -------------------------------------------------------------------

    def _strictify(self, out: JsonObject, path: str, notes: list[str]) -> JsonObject:
        if not out or ("type" not in out and not any(k in out for k in ("anyOf", "enum", "const"))):
            raise StrictImpossible(f"{path} accepts any value, which strict mode cannot express")
        if out.get("type") == "object" or "properties" in out:
            _refuse_open_object(out, path)
            out["additionalProperties"] = False
            props = _object(out.setdefault("properties", {}))
            if self.profile.strict_all_required:
                required = set(_list(out.get("required")))
                for name, sub in props.items():
                    if name not in required:
                        props[name] = _nullable(_object(sub))
                        self.note("info", f"{path}.{name}", "optional property made required "
                                  "and nullable (null means 'not given')")
                out["required"] = list(props)
        return out

    # -- Gemini's OpenAPI subset ---------------------------------------------------------

    def _openapi(self, node: JsonObject, path: str) -> JsonObject:
        node = dict(node)
        kind = node.get("type")
        if isinstance(kind, list):
            others = [k for k in kind if k != "null"]
            if len(others) == 1:
                node["type"] = others[0]
                if "null" in kind:
                    node["nullable"] = True
            else:
                node.pop("type")
                node["anyOf"] = [{"type": k} for k in others]
                if "null" in kind:
                    node["nullable"] = True
        options = node.get("anyOf") or node.get("oneOf")
        if isinstance(options, list):
            node = self._collapse_nullable(node, options)
        if "const" in node:
            node["enum"] = [node.pop("const")]
        if "enum" in node:
            node = self._string_enum(node, path)
        fmt = node.get("format")
        if fmt is not None and fmt not in _OPENAPI_FORMATS.get(node.get("type"), ()):
            node.pop("format")
            node["description"] = f"{_text(node.get('description'))} Format: {fmt}.".strip()
            self.note("info", path, f"format '{fmt}' is not accepted; moved into the description")
        return node

    def _collapse_nullable(self, node: JsonObject, options: list[JsonValue]) -> JsonObject:
        non_null = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
        if len(non_null) == len(options):
            if "oneOf" in node:
                node["anyOf"] = node.pop("oneOf")
            return node
        node.pop("anyOf", None)
        node.pop("oneOf", None)
        if len(non_null) == 1 and isinstance(non_null[0], dict):
            return {**non_null[0], **node, "nullable": True}
        return {**node, "anyOf": non_null, "nullable": True}

    def _string_enum(self, node: JsonObject, path: str) -> JsonObject:
        values = _list(node["enum"])
        if all(isinstance(v, str) for v in values):
            node.setdefault("type", "string")
            return node
        node["enum"] = [_enum_text(v) for v in values]
        original = node.get("type")
        node["type"] = "string"
        self.note("info", path, f"enum of {original or 'mixed'} values shown as strings; "
                  "string answers are converted back when the call comes back")
        return node


_HOW_TO_FIX = ("declare its keys (a pydantic model, a dataclass or a TypedDict), or export "
               "this tool without strict")


def _refuse_open_object(out: JsonObject, path: str) -> None:
    """Strict mode can only close an object: refuse one whose meaning is to take other keys —
    a map, or a free-form object (no declared keys), which closed would take nothing but
    ``{}``. The top level without properties is a tool without arguments, closed as it means."""
    extra = out.get("additionalProperties")
    if isinstance(extra, dict):
        raise StrictImpossible(f"{path} is a map (keys → {_short_json(extra)}), which strict "
                               f"mode cannot declare; {_HOW_TO_FIX}")
    free_form = extra is True or (extra is None and not out.get("properties")
                                  and path != "parameters")
    if free_form:
        raise StrictImpossible(f"{path} is a free-form object (any keys), which strict mode "
                               f"would close to accept only {{}}; {_HOW_TO_FIX}")


def _nullable(sub: JsonObject) -> JsonObject:
    kind = sub.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return sub
    if isinstance(kind, str):
        out: JsonObject = {**sub, "type": [kind, "null"]}
        enum = out.get("enum")
        if isinstance(enum, list) and None not in enum:
            out["enum"] = [*enum, None]
        return out
    options = sub.get("anyOf")
    if isinstance(options, list):
        if any(isinstance(o, dict) and o.get("type") == "null" for o in options):
            return sub
        return {**sub, "anyOf": [*options, {"type": "null"}]}
    desc = {"description": sub["description"]} if "description" in sub else {}
    rest = {k: v for k, v in sub.items() if k != "description"}
    return {"anyOf": [rest, {"type": "null"}], **desc}


def _cut_refs(node: JsonValue) -> JsonValue:
    if isinstance(node, list):
        return [_cut_refs(n) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return {"type": "object", **({"description": node["description"]}
                                     if "description" in node else {})}
    return {k: _cut_refs(v) for k, v in node.items() if k not in ("$defs", "definitions")}


def _enum_text(value: JsonValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _short_json(value: JsonValue, limit: int = 120) -> str:
    text = dump_json(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _object(value: JsonValue) -> JsonObject:
    """``value`` when it is a JSON object, else an empty one (a schema that says nothing)."""
    return value if isinstance(value, dict) else {}


def _list(value: JsonValue) -> list[JsonValue]:
    return value if isinstance(value, list) else []


def _text(value: JsonValue) -> str:
    return value if isinstance(value, str) else ""

