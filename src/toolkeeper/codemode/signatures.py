"""Tools as Python signatures with their docstrings, generated from their JSON Schemas, so a
model writing a script knows what it may call and how."""

from __future__ import annotations

import builtins
import keyword
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..tools.tool import Tool

__all__ = ["function_name", "function_names", "signature"]

RESERVED = frozenset({*dir(builtins), "call_tool", "search_tools", "result", "Result",
                      "WORKSPACE"})
"""Names a tool's function must not take: the script's builtins and the prelude's own."""

_TYPES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool",
          "array": "list", "object": "dict", "null": "None"}
_MAX_CLASSES = 20
"""Nested object types shown as TypedDicts per signature, at most (the rest read ``dict``)."""


class _Annotations:
    """Python annotations of one tool's JSON Schema: ``$ref``s followed into ``$defs``, enums as
    ``Literal``, nested objects as ``TypedDict`` classes written before the function."""

    def __init__(self, root: Mapping[str, object]) -> None:
        self.root = root
        self.classes: dict[str, str] = {}

    def of(self, schema: object, hint: str) -> str:
        if not isinstance(schema, Mapping):
            return "Any"
        ref = schema.get("$ref")
        if isinstance(ref, str):
            name = ref.rsplit("/", 1)[-1]
            target = self._resolve(ref)
            return self.of(target, name) if target is not None else "Any"
        kind = schema.get("type")
        if "enum" in schema and isinstance(schema["enum"], list):
            return "Literal[" + ", ".join(repr(v) for v in schema["enum"][:10]) + "]"
        if "const" in schema:
            return f"Literal[{schema['const']!r}]"
        for key in ("anyOf", "oneOf"):
            options = schema.get(key)
            if isinstance(options, list):
                return " | ".join(dict.fromkeys(self.of(o, hint) for o in options))
        if isinstance(kind, list):
            return " | ".join(_TYPES.get(str(k), "Any") for k in kind)
        if kind == "array":
            items = schema.get("items")
            return f"list[{self.of(items, hint)}]" if isinstance(items, Mapping) else "list"
        if kind == "object" or "properties" in schema:
            return self._object(schema, hint)
        return _TYPES.get(str(kind), "Any")

    def _resolve(self, ref: str) -> Mapping[str, object] | None:
        found: object = self.root
        for part in ref.removeprefix("#/").split("/") if ref.startswith("#/") else ["?"]:
            found = found.get(part) if isinstance(found, Mapping) else None
        return found if isinstance(found, Mapping) else None

    def _object(self, schema: Mapping[str, object], hint: str) -> str:
        properties = schema.get("properties")
        if not isinstance(properties, Mapping) or not properties:
            extra = schema.get("additionalProperties")
            return f"dict[str, {self.of(extra, hint)}]" if isinstance(extra, Mapping) else "dict"
        name = _class_name(str(schema.get("title") or hint))
        if name in self.classes or len(self.classes) >= _MAX_CLASSES:
            return name if name in self.classes else "dict"
        self.classes[name] = ""  # taken first: a recursive type refers to itself by name
        listed = schema.get("required")
        required = {str(r) for r in listed} if isinstance(listed, list) else set()
        lines = [f"class {name}(TypedDict):"]
        for key, field in properties.items():
            kind = self.of(field, f"{name}_{key}")
            kind = kind if key in required else f"NotRequired[{kind}]"
            lines.append(f"    {key}: {kind}{_note(field)}")
        self.classes[name] = "\n".join(lines)
        return name


def _class_name(hint: str) -> str:
    words = "".join(c if c.isalnum() else " " for c in hint).split()
    name = "".join(w[:1].upper() + w[1:] for w in words) or "Object"
    return name if not name[0].isdigit() else f"T{name}"


def _note(field: object) -> str:
    """`` # description (default …)`` for a nested field, on one line."""
    if not isinstance(field, Mapping):
        return ""
    parts = [" ".join(str(field.get("description") or "").split())[:120]]
    if "default" in field:
        parts.append(f"(default {_python(field['default'])})")
    text = " ".join(p for p in parts if p)
    return f"  # {text}" if text else ""


def _python(value: object) -> str:
    """A JSON default as Python source (``null`` → ``None``, ``true`` → ``True``)."""
    return repr(value)


def function_name(name: str) -> str:
    """A Python identifier for a tool name (``math-add`` → ``math_add``; a keyword, a builtin
    or a prelude name gets ``_tool``: ``print`` → ``print_tool``)."""
    cleaned = "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in name)
    cleaned = cleaned if cleaned and not cleaned[0].isdigit() else f"t_{cleaned}"
    return f"{cleaned}_tool" if keyword.iskeyword(cleaned) or cleaned in RESERVED else cleaned


def function_names(names: Iterable[str]) -> dict[str, str]:
    """Each tool's function name, unique in order (``a-b`` and ``a_b`` → ``a_b``, ``a_b_2``)."""
    taken: set[str] = set()
    found: dict[str, str] = {}
    for name in names:
        base = candidate = function_name(name)
        number = 2
        while candidate in taken:
            candidate = f"{base}_{number}"
            number += 1
        taken.add(candidate)
        found[name] = candidate
    return found


def signature(tool: Tool, function: str | None = None) -> str:
    """``def name(a: int, b: str = 'x') -> Result:`` with the description and the parameters'
    descriptions as its docstring; nested object parameters as ``TypedDict`` classes before it.
    Types and defaults come from the JSON Schema (``$ref``s followed)."""
    schema = tool.parameters
    properties = schema.get("properties", {}) or {}
    required = set(schema.get("required", []) or [])
    ordered = [*(n for n in properties if n in required), *(n for n in properties
                                                           if n not in required)]
    kinds = _Annotations(schema)
    params = []
    for name in ordered:
        field = properties[name]
        param = f"{name}: {kinds.of(field, name)}"
        if name not in required:
            default = field.get("default") if isinstance(field, Mapping) else None
            param += f" = {_python(default)}"
        params.append(param)
    head = f"def {function or function_name(tool.name)}({', '.join(params)}) -> Result:"
    doc = _docstring(tool.description, {n: properties[n] for n in ordered})
    return "\n\n".join([*(c for c in kinds.classes.values() if c), head + doc])


def _docstring(description: str, fields: Mapping[str, object]) -> str:
    """The description, then ``Args:`` with each described parameter, indented as a body."""
    text = [line.rstrip() for line in description.strip().splitlines()]
    args = [f"    {name}: {' '.join(str(f.get('description')).split())}"
            for name, f in fields.items() if isinstance(f, Mapping) and f.get("description")]
    if args:
        text += ["", "Args:", *args] if text else ["Args:", *args]
    if not text:
        return ""
    body = "\n".join(f"    {line}" if line else "" for line in text).replace('"""', "'''")
    return f'\n    """{body.lstrip()}"""' if len(text) == 1 else f'\n    """{body.lstrip()}\n    """'
