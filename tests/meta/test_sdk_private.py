"""toolkeeper reads none of the MCP SDK's private attributes: a patch release of the SDK may
rename them, and a server that reached them would break silently (a request answered with an
empty lifespan, a client never told of a change). What it needs it takes through the SDK's
public API (the face's own ``lifespan``, the request context's ``session``).

The check: every ``self._name`` the installed SDK assigns, read by name anywhere in src/ (as
``x._name`` or ``getattr(x, "_name")``) where toolkeeper does not define that name itself."""

from __future__ import annotations

import ast
from importlib import metadata
from pathlib import Path

import mcp

SRC = Path(__file__).resolve().parents[2] / "src" / "toolkeeper"
SDK = Path(mcp.__file__).resolve().parent


def _assigned_private(root: Path) -> set[str]:
    """The ``_names`` a package's classes assign on ``self`` or define as methods."""
    names: set[str] = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                    and isinstance(node.value, ast.Name) and node.value.id == "self":
                names.add(node.attr)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(node.name)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def _read(root: Path) -> dict[str, list[str]]:
    """Each private name read in ``root`` (attribute or ``getattr`` string), with where."""
    found: dict[str, list[str]] = {}
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name, line = None, 0
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                name, line = node.attr, node.lineno
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id in ("getattr", "hasattr") and len(node.args) > 1 \
                    and isinstance(node.args[1], ast.Constant):
                name, line = str(node.args[1].value), node.lineno
            if name is not None and name.startswith("_") and not name.startswith("__"):
                found.setdefault(name, []).append(f"{path.relative_to(SRC)}:{line}")
    return found


def test_no_private_attribute_of_the_mcp_sdk_is_read() -> None:
    sdk_private = _assigned_private(SDK) - _assigned_private(SRC)
    reached = {name: where for name, where in _read(SRC).items() if name in sdk_private}
    assert reached == {}, (f"src/ reads private attributes of mcp {metadata.version('mcp')}: "
                           f"{reached}; use its public API")
