"""Raw JSON Schemas from the wild: normalize what has one clear meaning, report the rest.

Also the lax coercion of obviously-meant values ("5" for an integer) for raw-schema tools, done
with pydantic's own lax rules so function tools and raw-schema tools agree.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Mapping

from pydantic import TypeAdapter, ValidationError

from ..core.json import JsonObject, JsonValue

__all__ = ["SchemaWarning", "coerce_arguments", "normalize_schema"]


class SchemaWarning(UserWarning):
    """A raw tool schema has a problem toolkeeper could not repair with certainty."""


_TYPE_NAMES = {
    "object": "object", "dict": "object", "map": "object", "mapping": "object", "hash": "object",
    "array": "array", "list": "array", "tuple": "array", "set": "array", "sequence": "array",
    "string": "string", "str": "string", "text": "string",
    "integer": "integer", "int": "integer", "long": "integer", "int32": "integer",
    "int64": "integer", "short": "integer",
    "number": "number", "float": "number", "double": "number", "decimal": "number",
    "numeric": "number", "real": "number",
    "boolean": "boolean", "bool": "boolean",
    "null": "null", "none": "null", "nonetype": "null", "nil": "null",
}
_ANY_NAMES = {"any", "object?", "mixed", "*"}
_PY_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str, "integer": int, "number": (int, float), "boolean": bool,
    "array": list, "object": dict, "null": type(None),
}


def normalize_schema(schema: object, *, where: str = "parameters", stacklevel: int = 3
                     ) -> tuple[JsonObject, list[str]]:
    """Return a repaired copy of a tool's parameter schema and the problems left in it.

    Repaired (one clear meaning): non-standard type names (``dict``, ``float``, ``long``,
    ``String``...), ``any`` (dropped), draft-3 ``"required": true`` on properties, a missing
    top-level ``"type": "object"``. Reported with their JSON path: ``required`` naming a missing
    property, defaults of the wrong type, enum values that do not match the type, unknown type
    names. Nothing raises; problems are also emitted as ``SchemaWarning`` (pointing
    ``stacklevel`` frames up: at the code that made the tool).
    """
    if schema is None:
        return {"type": "object", "properties": {}}, []
    if not isinstance(schema, dict):
        problem = f"{where}: schema must be a JSON object, got {type(schema).__name__}; using {{}}"
        warnings.warn(problem, SchemaWarning, stacklevel=stacklevel)
        return {"type": "object", "properties": {}}, [problem]
    fixed = copy.deepcopy(schema)
    problems: list[str] = []
    if "type" not in fixed and ("properties" in fixed or not fixed):
        fixed["type"] = "object"
    if fixed.get("type") != "object" and "properties" not in fixed:
        fixed = _replaced(fixed, where, problems)
    if fixed.get("type") == "object":
        fixed.setdefault("properties", {})
    _walk(fixed, where, problems)
    for problem in problems:
        warnings.warn(problem, SchemaWarning, stacklevel=stacklevel)
    return fixed, problems


def _replaced(schema: dict[str, object], where: str, problems: list[str]) -> JsonObject:
    """A top level that is not an object (``{"type": "string"}``) cannot declare named
    arguments, which every provider requires: it is replaced by an empty object schema."""
    problems.append(f"{where}: the top level must be an object schema of named arguments, got "
                    f"type {schema.get('type', 'none')!r}; replaced by an empty object schema "
                    "(describe each argument under 'properties')")
    return {"type": "object", "properties": {}}


def _walk(node: JsonObject, path: str, problems: list[str]) -> None:
    _fix_type(node, path, problems)
    props = node.get("properties")
    if isinstance(props, dict):
        _fix_draft3_required(node, props)
        for name, sub in props.items():
            if isinstance(sub, dict):
                _walk(sub, f"{path}.properties.{name}", problems)
        for listed in _list(node.get("required")):
            if listed not in props:
                problems.append(f"{path}.required: names '{listed}', which is not a property")
    for key in ("items", "additionalProperties", "not"):
        child = node.get(key)
        if isinstance(child, dict):
            _walk(child, f"{path}.{key}", problems)
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for i, sub in enumerate(_list(node.get(key))):
            if isinstance(sub, dict):
                _walk(sub, f"{path}.{key}[{i}]", problems)
    for key in ("$defs", "definitions"):
        defined = node.get(key)
        for name, sub in (defined.items() if isinstance(defined, dict) else ()):
            if isinstance(sub, dict):
                _walk(sub, f"{path}.{key}.{name}", problems)
    _check_values(node, path, problems)


def _list(value: JsonValue) -> list[JsonValue]:
    return value if isinstance(value, list) else []


def _object(value: object) -> Mapping[str, object]:
    return value if isinstance(value, dict) else {}


def _canonical_type(name: object, path: str, problems: list[str]) -> str | None:
    if not isinstance(name, str):
        problems.append(f"{path}.type: {name!r} is not a type name")
        return None
    lowered = name.strip().lower()
    if lowered in _TYPE_NAMES:
        return _TYPE_NAMES[lowered]
    if lowered not in _ANY_NAMES:
        problems.append(f"{path}.type: unknown type name {name!r}; treated as any type")
    return None


def _fix_type(node: JsonObject, path: str, problems: list[str]) -> None:
    if "type" not in node:
        return
    raw = node["type"]
    names = raw if isinstance(raw, list) else [raw]
    canonical: list[JsonValue] = [
        c for c in (_canonical_type(n, path, problems) for n in names) if c]
    if not canonical:
        del node["type"]
    elif isinstance(raw, list):
        node["type"] = list(dict.fromkeys(canonical))
    else:
        node["type"] = canonical[0]
    if node.get("type") == "array" and isinstance(node.get("items"), list):
        node["prefixItems"] = node.pop("items")


def _fix_draft3_required(node: JsonObject, props: JsonObject) -> None:
    required = node.get("required")
    names = list(required) if isinstance(required, list) else []
    for name, sub in props.items():
        if isinstance(sub, dict) and isinstance(sub.get("required"), bool) \
                and sub.pop("required") and name not in names:
            names.append(name)
    if names or isinstance(required, bool):
        node["required"] = names


def _matches(value: object, type_name: object) -> bool:
    names = type_name if isinstance(type_name, list) else [type_name]
    for name in names:
        expected = _PY_TYPES.get(name) if isinstance(name, str) else None
        if expected is None:
            return True
        if isinstance(value, bool) and name in ("integer", "number"):
            continue
        if isinstance(value, expected):
            return True
    return False


def _check_values(node: JsonObject, path: str, problems: list[str]) -> None:
    type_name = node.get("type")
    if type_name is None:
        return
    if "default" in node and not _matches(node["default"], type_name):
        problems.append(f"{path}.default: {node['default']!r} does not match type {type_name!r}")
    for value in _list(node.get("enum")):
        if not _matches(value, type_name):
            problems.append(f"{path}.enum: value {value!r} does not match type {type_name!r}")


_LAX: dict[str, TypeAdapter[int] | TypeAdapter[float] | TypeAdapter[bool]] = {
    "integer": TypeAdapter(int), "number": TypeAdapter(float), "boolean": TypeAdapter(bool),
}


def coerce_arguments(arguments: Mapping[str, object], schema: Mapping[str, object]
                     ) -> dict[str, object]:
    """Coerce obviously-meant scalars ("5" → 5, "true" → True) where the schema says so.

    Uses pydantic's lax rules for int, float and bool; everything else is left for the validator
    to judge.
    """
    coerced = _coerced(dict(arguments), schema)
    return coerced if isinstance(coerced, dict) else dict(arguments)


def _coerced(value: object, schema: object) -> object:
    """``value`` with its obviously-meant scalars coerced; itself when nothing needed it."""
    if not isinstance(schema, dict):
        return value
    type_name = schema.get("type")
    if isinstance(type_name, list):
        if value is None and "null" in type_name:
            return None
        others = [t for t in type_name if t != "null"]
        type_name = others[0] if len(others) == 1 else None
    if type_name is None:
        options = schema.get("anyOf") or schema.get("oneOf")
        if isinstance(options, list) and value is not None:
            non_null = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
            if len(non_null) == 1:
                return _coerced(value, non_null[0])
        return value
    if type_name == "object" and isinstance(value, dict):
        props = _object(schema.get("properties"))
        return {k: _coerced(v, props.get(k)) for k, v in value.items()}
    if type_name == "array" and isinstance(value, list):
        items = schema.get("items")
        return [_coerced(v, items) for v in value] if isinstance(items, dict) else value
    adapter = _LAX.get(type_name)
    if adapter is None or (_matches(value, type_name) and not _float_for_int(value, type_name)):
        return value
    try:
        return adapter.validate_python(value)
    except ValidationError:
        return value


def _float_for_int(value: object, type_name: str) -> bool:
    return type_name == "integer" and isinstance(value, float)


def accepts_null(schema: object) -> bool:
    """Whether ``null`` is a valid value for ``schema``."""
    if not isinstance(schema, dict) or not schema:
        return True
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if kind is None and "$ref" not in schema:
        options = schema.get("anyOf") or schema.get("oneOf") or []
        return not options or any(accepts_null(o) for o in options)
    return False


def drop_optional_nulls(arguments: Mapping[str, object], schema: Mapping[str, object]
                        ) -> Mapping[str, object]:
    """Treat ``null`` for an optional property that cannot be null as "not given".

    Strict-mode exports make optional properties required and nullable; a model then sends
    ``null`` for an argument it means to leave out. Dropping those keys lets the default apply.
    Returns ``arguments`` itself when nothing is dropped.
    """
    kept = _dropped(arguments, schema, _object(schema.get("$defs")))
    return kept if isinstance(kept, dict) else arguments


def _dropped(value: object, schema: object, defs: Mapping[str, object]) -> object:
    if not isinstance(value, dict) or not isinstance(schema, dict):
        return value
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        schema = _object(defs.get(ref.rsplit("/", 1)[-1]))
    props = schema.get("properties")
    if not isinstance(props, dict):
        return value
    listed = schema.get("required")
    required = set(listed) if isinstance(listed, list) else set()
    if not any(v is None or isinstance(v, dict) for v in value.values()):
        return value
    out = {}
    for key, item in value.items():
        sub = props.get(key)
        if item is None and key not in required and sub is not None and not accepts_null(sub):
            continue
        out[key] = _dropped(item, sub, defs) if isinstance(item, dict) else item
    return out
