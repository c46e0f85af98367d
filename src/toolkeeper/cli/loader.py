"""Find tools from a command-line target: ``module:object``, ``path/file.py:object`` or a module."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import sysconfig
import traceback
from pathlib import Path
from types import ModuleType
from typing import TypeGuard

from ..core.spec import ToolLike
from ..errors import UsageError
from ..offers.prompts import Prompt
from ..offers.resources import Resource
from ..toolbox.catalog import CatalogBase
from ..tools.hosted import is_hosted_tool, is_provider_defined_tool
from ..tools.tool import Tool

__all__ = ["load_object", "load_offers", "load_tools"]


def _import(target: str) -> ModuleType:
    path = Path(target)
    if target.endswith(".py") or path.is_file():
        if not path.is_file():
            raise UsageError(f"no such file: {target}")
        name = f"_toolkeeper_target_{abs(hash(path.resolve()))}"
        if name in sys.modules:  # its tools, then its resources and prompts: imported once
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise UsageError(f"cannot import {target} as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(path.resolve().parent))
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            sys.modules.pop(name, None)
            raise _load_error(target, exc) from exc
        finally:
            sys.path.remove(str(path.resolve().parent))
        return module
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        if exc.name and target.startswith(exc.name):
            raise UsageError(f"cannot import module '{target}': {exc}") from exc
        raise _load_error(target, exc) from exc
    except Exception as exc:
        raise _load_error(target, exc) from exc


# Where the standard library and installed packages live: an error is reported at the last
# line of the user's own code, not inside a library it called.
_LIBRARY_DIRS = tuple({sysconfig.get_path(key) for key in ("stdlib", "platstdlib", "purelib",
                                                             "platlib")})


def _load_error(target: str, exc: Exception) -> UsageError:
    """One line that says where the user's code failed: ``file:line: what``."""
    if isinstance(exc, SyntaxError):
        where = f"{exc.filename}:{exc.lineno}" if exc.filename else target
        return UsageError(f"{where}: syntax error: {exc.msg}")
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith(("<frozen", *_LIBRARY_DIRS))]
    where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else target
    return UsageError(f"{where}: {type(exc).__name__}: {exc} (while importing {target})")


def _is_tool(obj: object) -> TypeGuard[ToolLike]:
    return isinstance(obj, Tool) or is_hosted_tool(obj) or is_provider_defined_tool(obj)


def _as_tools(obj: object, label: str) -> list[ToolLike]:
    if _is_tool(obj):
        return [obj]
    if isinstance(obj, list | tuple):
        return [t for item in obj for t in _as_tools(item, label)]
    if callable(obj) and not isinstance(obj, type):
        return [Tool.from_function(obj)]
    if isinstance(obj, type) and issubclass(obj, Tool):
        return [obj()]  # type: ignore[call-overload]  # a BaseTool subclass names itself
    raise UsageError(f"'{label}' is a {type(obj).__name__}, not a tool, function or list of tools")


def load_object(target: str) -> CatalogBase | list[ToolLike]:
    """A catalog (returned as is) or the list of tools named by ``target``."""
    module_part, _, attr = target.partition(":") if ":" in target else (target, "", "")
    module = _import(module_part)
    if attr:
        obj: object = module
        for part in attr.split("."):
            if not hasattr(obj, part):
                raise UsageError(f"'{module_part}' has no attribute '{attr}'")
            obj = getattr(obj, part)
        return obj if isinstance(obj, CatalogBase) else _as_tools(obj, attr)
    tools = [value for value in vars(module).values() if _is_tool(value)]
    if not tools:
        raise UsageError(f"'{target}' defines no tools; decorate functions with @tool or name "
                         "one object with 'module:object'")
    return tools


def load_tools(target: str) -> list[ToolLike]:
    """Tools named by ``target``.

    ``pkg.mod:obj`` or ``file.py:obj`` loads one object (a tool, a function, a BaseTool subclass,
    a list of them, or a catalog); ``pkg.mod`` or ``file.py`` alone loads every tool defined in
    the module.
    """
    obj = load_object(target)
    return list(obj.all() if isinstance(obj, CatalogBase) else obj)


def load_offers(target: str) -> list[Resource | Prompt]:
    """The resources, resource templates and prompts a module declares (``@resource``,
    ``@prompt``); none for a ``module:object`` target."""
    if ":" in target:
        return []
    return [value for value in vars(_import(target)).values()
            if isinstance(value, Resource | Prompt)]
