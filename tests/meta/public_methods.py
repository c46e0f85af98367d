"""Run by tests/meta/test_nothing_is_attached.py in a fresh interpreter: ``import toolkeeper``
and nothing else of toolkeeper's, then

1. every class of every toolkeeper module now loaded has no public attribute that its own class
   body does not define (an attribute attached from elsewhere shows up here), and
2. every public method of the catalog — on a toolbox and on each view its methods build — and of
   a tool runs, with arguments made from the parameter names (a method whose work another module
   registers fails here when that module is not loaded).

The method lists come from the classes; only the sample value of each parameter name is written
here, and a method with a parameter this table does not know fails the run, so it gets one.
Prints one line per problem, then ``ok`` if there were none.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import sys
import textwrap
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import toolkeeper

TOOL = "echo_text"


def echo_text(text: str = "hi") -> str:
    """Say the text back.

    Args:
        text: What to say.
    """
    return text


def _samples(shown: str = TOOL) -> dict[str, list[Any]]:
    """Values to call a method with, by parameter name; ``shown`` is the echo tool's name in
    the catalog at hand (a view may rename it)."""
    return {
        "name": [shown], "name_or_alias": [shown], "key": [shown], "query": ["echo"],
        "category": ["general"], "risk": [toolkeeper.ToolRisk.SAFE], "limit": [3],
        "prefix": ["p"], "mapping": [{TOOL: "say"}],
        "calls": [[toolkeeper.ToolCall(id="1", name=shown, arguments={})]],
        "skill": [toolkeeper.Skill(name="s", instructions="Say it.", allowed_tools=(TOOL,))],
        "api_format": list(toolkeeper.API_FORMATS), "parameters": [{}], "arguments": [{}],
        "kwargs": [{}], "value": ["hi"], "namespace": ["ns"], "func": [echo_text],
    }


def _class_body_names(cls: type) -> set[str] | None:
    """Names a class body binds (functions, assignments, annotations), or ``None`` if its source
    is not at hand."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return None
    node = ast.parse(source).body[0]
    if not isinstance(node, ast.ClassDef):
        return None
    names: set[str] = set()
    body = list(node.body)
    while body:
        stmt = body.pop(0)
        if isinstance(stmt, ast.If):  # `if TYPE_CHECKING: ... else: ...` binds in the body too
            body[:0] = [*stmt.body, *stmt.orelse]
            continue
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(stmt.name)
        elif isinstance(stmt, ast.Assign):
            bound = {n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            names |= bound
            if bound & {"__slots__", "_fields_"}:  # attributes declared as a table: their names
                for item in getattr(stmt.value, "elts", []):
                    first = item.elts[0] if isinstance(item, ast.Tuple) else item
                    if isinstance(first, ast.Constant) and isinstance(first.value, str):
                        names.add(first.value)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            names.add(stmt.target.id)
    return names


def _framework_names(cls: type) -> set[str]:
    """Attributes a base class from outside toolkeeper (pydantic, enum, typing) writes into every
    subclass it makes."""
    outside = [b for b in cls.__mro__[1:] if not b.__module__.startswith("toolkeeper")]
    return {name for base in outside for name in dir(base)}


def attached_attributes() -> Iterator[str]:
    for module in sorted(m for m in sys.modules if m.split(".")[0] == "toolkeeper"):
        for cls in vars(sys.modules[module]).values():
            if not isinstance(cls, type) or cls.__module__ != module:
                continue
            body = _class_body_names(cls)
            if body is None:
                continue
            extra = {n for n in vars(cls) if not n.startswith("_")} - body - _framework_names(cls)
            extra -= {m.name for m in getattr(cls, "__members__", {}).values()}  # enum members
            for name in sorted(extra):
                yield f"{module}.{cls.__qualname__}.{name} is not defined in its class body"


def public_methods(cls: type) -> list[str]:
    return sorted(name for name, member in inspect.getmembers(cls)
                  if not name.startswith("_") and callable(member)
                  and not isinstance(inspect.getattr_static(cls, name), type))


def _calls(method: Callable[..., Any], samples: dict[str, list[Any]]) -> Iterator[
        tuple[list[Any], dict[str, Any]]]:
    """Arguments for each call of ``method``: its required parameters from the samples (each
    sample of a parameter that has several, such as ``api_format``; the first of the rest)."""
    required = [p for p in inspect.signature(method).parameters.values()
                if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    unknown = [p.name for p in required if p.name not in samples]
    if unknown:
        raise LookupError(f"no sample value for parameter(s) {unknown}: add them to _samples")
    varying = next((p.name for p in required if len(samples[p.name]) > 1), None)
    for value in samples[varying] if varying else [None]:
        chosen = {p.name: value if p.name == varying else samples[p.name][0] for p in required}
        yield ([chosen[p.name] for p in required if p.kind is not p.KEYWORD_ONLY],
               {p.name: chosen[p.name] for p in required if p.kind is p.KEYWORD_ONLY})


def _run(method: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        result = method(*args, **kwargs)
        if inspect.iscoroutine(result):
            result = asyncio.run(result)
    return result


def sweep(label: str, obj: Any, cls: type, samples: dict[str, list[Any]]) -> Iterator[
        tuple[str, Any]]:
    """Call every public method ``cls`` gives ``obj``; yields (problem or "", result)."""
    for name in public_methods(cls):
        method = getattr(obj, name)
        try:
            for args, kwargs in _calls(method, samples):
                yield "", _run(method, args, kwargs)
        except Exception as exc:
            yield f"{label}.{name}: {type(exc).__name__}: {exc}", None


def catalog_problems() -> Iterator[str]:
    catalog_class = next(c for c in toolkeeper.Toolbox.__mro__ if c.__name__ == "CatalogBase")
    box = toolkeeper.Toolbox([toolkeeper.Tool.from_function(echo_text)])
    views: list[Any] = []
    for problem, result in sweep("Toolbox", box, catalog_class, _samples()):
        if problem:
            yield problem
        elif isinstance(result, catalog_class) and result is not box:
            views.append(result)  # a method that builds a view: sweep the view too
    if not views:
        yield "no method of the catalog built a view"
    for view in views:
        samples = _samples(view.names()[-1])
        yield from (p for p, _ in sweep(type(view).__name__, view, catalog_class, samples) if p)
    tool = toolkeeper.Tool.from_function(echo_text)
    yield from (p for p, _ in sweep("Tool", tool, toolkeeper.Tool, _samples()) if p)


def main() -> int:
    problems = [*attached_attributes(), *catalog_problems()]
    print("\n".join(problems))
    print("ok" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
