"""Adding whole modules, classes and toolboxes to a toolbox, each under a namespace."""

from __future__ import annotations

import inspect
from types import ModuleType
from typing import TYPE_CHECKING

from ..core.spec import ToolLike
from ..errors import UsageError
from ..tools.naming import normalize_tool_name
from ..tools.tool import Tool

if TYPE_CHECKING:
    from .catalog import CatalogBase
    from .toolbox import Toolbox

__all__ = ["add_class", "add_module", "add_toolbox"]


def add_module(box: Toolbox, module: ModuleType, namespace: str | None = None) -> list[str]:
    """Add the tools a module defines; without any, its public functions become tools."""
    values = list(vars(module).values())
    tools: list[object] = [v for v in values if isinstance(v, Tool) or (
        not isinstance(v, type) and isinstance(v, ToolLike))]
    if not tools:
        tools = [v for v in values if inspect.isfunction(v) and not v.__name__.startswith("_")
                 and v.__module__ == module.__name__]
    if not tools:
        raise UsageError(f"module '{module.__name__}' defines no tools and no public functions")
    return [box.add(t, namespace=namespace).qualified_name for t in tools]


def add_class(box: Toolbox, obj: object, namespace: str | None = None) -> list[str]:
    """Add the public methods of a class or instance; the namespace defaults to the class name.

    Given a class, it is instantiated without arguments when it has instance methods.
    """
    cls = obj if inspect.isclass(obj) else type(obj)
    instance = obj
    if inspect.isclass(obj) and any(inspect.isfunction(v) for k, v in vars(cls).items()
                                    if not k.startswith("_")):
        try:
            instance = cls()
        except TypeError as exc:
            raise UsageError(f"cannot instantiate {cls.__name__} without arguments ({exc}); "
                             "pass an instance instead") from exc
    ns = namespace or normalize_tool_name(cls.__name__)
    names = []
    for name, member in inspect.getmembers(instance, callable):
        if name.startswith("_") or inspect.isclass(member):
            continue
        tool = Tool.from_function(member, name=name)
        names.append(box.add(tool, namespace=ns).qualified_name)
    if not names:
        raise UsageError(f"{cls.__name__} has no public methods to add")
    return names


def add_toolbox(box: Toolbox, other: CatalogBase, namespace: str | None = None) -> list[str]:
    """Add every tool of another catalog, with its category, tags, aliases and state."""
    names = []
    for entry in other.explain():
        tool = box.add(entry.tool, category=entry.category, tags=entry.tags,
                       aliases=entry.aliases, namespace=namespace)
        key = tool.qualified_name
        if not entry.enabled:
            box.disable(key, entry.reason)
        names.append(key)
    return names
