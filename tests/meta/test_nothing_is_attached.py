"""A class has the methods its own body defines, in every import order: no module attaches an
attribute to a class it imported, and no module's top level calls another toolkeeper module for
its side effects (a registration, a table filled in) — what made ``localized()`` vanish when a
module was not imported. The lists below are derived from the source, not named by hand."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from .test_layers import MODULES

# Import-time calls into another toolkeeper module that are known and left for their room's owner
# to remove: each entry must still be there, so the list cannot go stale.
NOT_YET_REMOVED: set[str] = set()


def _imported_names(module: str, tree: ast.Module) -> dict[str, str]:
    """Name bound by an import at the top of ``module`` → the module it came from."""
    package = module.split(".") if MODULES[module].name == "__init__.py" else module.split(".")[:-1]
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            source = ".".join([*base, node.module] if node.module else base)
            for alias in node.names:
                names[alias.asname or alias.name] = source
        elif isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = alias.name
    return names


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _top_level(tree: ast.Module) -> Iterator[ast.stmt]:
    """Statements that run when the module is imported (``if``/``try``/``with`` bodies too, not
    function or class bodies)."""
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop(0)
        yield node
        if isinstance(node, ast.If | ast.Try | ast.With | ast.For | ast.While):
            for field in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, field, []):
                    pending.extend(child.body if isinstance(child, ast.ExceptHandler) else [child])


def _attribute_writes(tree: ast.Module) -> Iterator[tuple[ast.AST, ast.expr]]:
    """(statement, written object) for every ``x.attr = …``, ``del x.attr`` and
    ``setattr(x, …)`` / ``delattr(x, …)`` anywhere in the module."""
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in {"setattr", "delattr"} and node.args):
            yield node, node.args[0]
        for target in targets:
            for part in ast.walk(target):
                if isinstance(part, ast.Attribute) and isinstance(part.ctx, ast.Store | ast.Del):
                    yield node, part.value


def _is_toolkeeper(source: str) -> bool:
    return source == "toolkeeper" or source.startswith("toolkeeper.")


def _patches_in(tree: ast.Module, imported: dict[str, str]) -> Iterator[tuple[int, str]]:
    """(line, imported name) of every attribute written on an imported name."""
    for node, written in _attribute_writes(tree):
        name = _root(written)
        if name in imported:
            yield getattr(node, "lineno", 0), name


def _calls_in(tree: ast.Module, imported: dict[str, str]) -> Iterator[tuple[str, str]]:
    """(verb, imported name) of every top-level statement that calls or writes into something
    imported from toolkeeper without keeping a value of its own."""
    for node in _top_level(tree):
        effects: list[ast.expr] = []
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            effects = [node.value.func]  # a call whose value nobody keeps: a side effect
        elif isinstance(node, ast.Assign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            effects = [t for t in targets if isinstance(t, ast.Subscript | ast.Attribute)]
        for effect in effects:
            name = _root(effect)
            if name in imported and _is_toolkeeper(imported[name]):
                yield ("calls" if isinstance(node, ast.Expr) else "writes into"), name


def _scan() -> Iterator[tuple[str, ast.Module, dict[str, str]]]:
    for module, path in sorted(MODULES.items()):
        if path.name == "__main__.py":
            continue  # ``python -m``: running the program is what importing it is for
        tree = ast.parse(path.read_text())
        yield module, tree, _imported_names(module, tree)


def _patches() -> set[str]:
    return {f"{module}:{line} sets an attribute on {name!r}, imported from {imported[name]}"
            for module, tree, imported in _scan() for line, name in _patches_in(tree, imported)}


def _import_time_calls() -> set[str]:
    return {f"{module} {verb} {name} of {imported[name]}"
            for module, tree, imported in _scan() for verb, name in _calls_in(tree, imported)}


def test_no_module_sets_an_attribute_on_something_it_imported() -> None:
    assert _patches() == set()


def test_no_module_calls_another_toolkeeper_module_for_its_side_effects_at_import() -> None:
    found = _import_time_calls()
    assert found - NOT_YET_REMOVED == set(), "an import-time registration: make it a method " \
        "or a function the caller calls (a lower room reaches a room above through an entry " \
        "point the package declares: tests/meta/test_layers.py SEAMS)"
    assert NOT_YET_REMOVED - found == set(), "removed: take it out of NOT_YET_REMOVED too"


def test_the_checks_see_a_patch_and_a_registration() -> None:
    """The scans catch a patch and a registration (a made-up module, not the tree)."""
    tree = ast.parse("from .catalog import CatalogBase, register_view\n"
                     "from ..tools.tool import Tool\n"
                     "import toolkeeper.toolbox.catalog as catalog\n"
                     "Tool.get_schema = lambda self, f: {}\n"
                     "setattr(CatalogBase, 'localized', None)\n"
                     "register_view('with_skill', object)\n"
                     "catalog._VIEWS['filtered'] = object\n"
                     "def later():\n    CatalogBase.with_skill = None\n")
    imported = _imported_names("toolkeeper.toolbox.views", tree)
    assert imported["Tool"] == "toolkeeper.tools.tool"
    assert sorted(_patches_in(tree, imported)) == [
        (4, "Tool"), (5, "CatalogBase"), (9, "CatalogBase")]
    assert sorted(_calls_in(tree, imported)) == [
        ("calls", "register_view"), ("writes into", "Tool"), ("writes into", "catalog")]


def test_importing_toolkeeper_alone_gives_every_class_its_own_methods_and_they_run() -> None:
    """In a fresh interpreter (no other test's imports help): every class toolkeeper loads has
    exactly the public attributes its class body defines, and every public method of the
    catalog (on a toolbox and on each view its methods build) and of a tool runs."""
    script = Path(__file__).with_name("public_methods.py")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok"), done.stdout[-3000:]
