"""Frozen values are built once: no class writes its own fields through ``__dict__`` (which
goes round the checks a frozen object keeps, and leaves a half-built object when it fails).

A tool's fields are its frozen ``ToolDefinition``; a subclass keeps its own state in ordinary
attributes. The list below names the places that still fill an object's ``__dict__``, each with
its reason; an entry that is no longer there fails, so the list cannot go stale."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from .test_layers import MODULES

# module → why it fills an object's __dict__ directly
ALLOWED = {
    "toolkeeper.core.spec": "ToolSpec.trusted builds a new spec from a tool's checked values "
                            "without the dataclass __init__ (once per tool, on first export)",
    "toolkeeper.core.results": "_build makes a new result model from trusted values without "
                               "pydantic's per-call default lookups (the door's hot path)",
    "toolkeeper.gateway.remote": "RemoteTool keeps its relay in its __dict__; left for its "
                                 "room's owner (an ordinary attribute works the same)",
}


def _dict_writes(tree: ast.Module) -> Iterator[int]:
    """Lines that write an object's ``__dict__``: ``x.__dict__[k] = v``, ``x.__dict__.update``
    or ``.setdefault``, and ``object.__setattr__(x, "__dict__", …)``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Subscript) and _is_dict(target.value):
                    yield node.lineno
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and _fills_dict(node, node.func)):
            yield node.lineno


def _fills_dict(call: ast.Call, method: ast.Attribute) -> bool:
    if method.attr in {"update", "setdefault"}:
        return _is_dict(method.value)
    names_dict = (len(call.args) > 1 and isinstance(call.args[1], ast.Constant)
                  and call.args[1].value == "__dict__")
    return method.attr == "__setattr__" and names_dict


def _is_dict(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "__dict__"


def _writers() -> dict[str, list[int]]:
    found = {name: list(_dict_writes(ast.parse(path.read_text())))
             for name, path in MODULES.items()}
    return {name: lines for name, lines in found.items() if lines}


def test_no_class_writes_its_fields_through_its_dict() -> None:
    writers = _writers()
    unexplained = {name: lines for name, lines in writers.items() if name not in ALLOWED}
    assert unexplained == {}, "build a frozen value once, keep other state in attributes"
    assert set(ALLOWED) <= set(writers), "an ALLOWED entry no longer writes __dict__: drop it"
