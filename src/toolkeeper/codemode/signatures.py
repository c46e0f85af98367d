"""Tools as Python signatures with their docstrings, generated from their JSON Schemas, so a
model writing a script knows what it may call and how."""

from __future__ import annotations

import builtins
import keyword
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..tools.tool import Tool

__all__ = ["function_name", "function_names", "signature"]

RESERVED = frozenset({*dir(builtins), "call_tool", "search_tools", "result", "Result",
                      "WORKSPACE"})
"""Names a tool's function must not take: the script's builtins and the prelude's own."""

_TYPES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool",
          "array": "list", "object": "dict", "null": "None"}


def _annotation(schema: object) -> str:
    if not isinstance(schema, dict):
        return "Any"
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_TYPES.get(str(k), "Any") for k in kind)
    if "enum" in schema:
        return "Literal[" + ", ".join(repr(v) for v in schema["enum"][:10]) + "]"
    if kind == "array" and isinstance(schema.get("items"), dict):
        return f"list[{_annotation(schema['items'])}]"
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return " | ".join(_annotation(s) for s in schema[key])
    return _TYPES.get(str(kind), "Any")


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
    """``def name(a: int, b: str = None) -> Result:`` and the description as its docstring."""
    schema = tool.parameters
    properties = schema.get("properties", {}) or {}
    required = set(schema.get("required", []) or [])
    ordered = [*(n for n in properties if n in required), *(n for n in properties
                                                           if n not in required)]
    params = [f"{name}: {_annotation(properties[name])}" + ("" if name in required else
                                                            " = None") for name in ordered]
    doc = tool.description.strip().replace('"""', "'''")
    head = f"def {function or function_name(tool.name)}({', '.join(params)}) -> Result:"
    return head + (f'\n    """{doc}"""' if doc else "")
