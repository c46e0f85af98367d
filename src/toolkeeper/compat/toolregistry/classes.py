"""Which callables of a class or an instance become tools, as toolregistry registers a class:
a class of static methods gives its static methods; any other class is made (with
``constructor_kwargs``) and gives its public methods, as an instance does; classmethods and
names starting with ``_`` are left out; inherited methods count unless ``traverse_mro=False``."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping

__all__ = ["class_methods", "class_namespace", "detect_source"]


def detect_source(target: object) -> str:
    """``native`` for a callable, ``class`` for a class or another object.

    Raises:
        TypeError: a string, dict, path or number, which could be an MCP or OpenAPI address.
    """
    if isinstance(target, type):
        return "class"
    if callable(target):
        return "native"
    if not isinstance(target, str | dict | bytes | int | float | bool | type(None)) \
            and not hasattr(target, "__fspath__"):
        return "class"
    raise TypeError(f"Cannot auto-detect registration source for {type(target).__name__!r}. "
                    "Pass source='mcp' or source='openapi' explicitly.")


def class_namespace(target: object, namespace: bool | str | None) -> str | None:
    """The namespace a class's tools get: the string given, the class's name for ``True``."""
    if isinstance(namespace, str):
        return namespace or None
    if namespace:
        return target.__name__ if isinstance(target, type) else type(target).__name__
    return None


def class_methods(target: object, *, traverse_mro: bool = True,
                  constructor_kwargs: Mapping[str, object] | None = None
                  ) -> list[tuple[str, Callable[..., object]]]:
    """(method name, callable) for each method of ``target`` that becomes a tool.

    Raises:
        TypeError: a class that needs constructor arguments that were not given (the message
            shows how to register an instance instead).
    """
    if isinstance(target, type) and _only_static(target):
        return [(name, member.__func__) for name, member in _members(target, traverse_mro)
                if isinstance(member, staticmethod)]
    instance = _made(target, constructor_kwargs or {}) if isinstance(target, type) else target
    names = [n for n, _ in _members(type(instance), True)] if traverse_mro \
        else [n for n in dir(instance) if not n.startswith("_")]
    found: dict[str, Callable[..., object]] = {}
    for name in names:
        member = inspect.getattr_static(type(instance), name, None)
        attr = getattr(instance, name, None)
        if not isinstance(member, classmethod) and attr is not None and callable(attr):
            found[name] = attr
    return list(found.items())


def _members(cls: type, traverse_mro: bool) -> list[tuple[str, object]]:
    classes = [k for k in reversed(inspect.getmro(cls)) if k is not object] if traverse_mro \
        else [cls]
    found: dict[str, object] = {}
    for klass in classes:
        found.update({n: m for n, m in klass.__dict__.items() if not n.startswith("_")})
    return list(found.items())


def _only_static(cls: type) -> bool:
    return all(isinstance(member, staticmethod) for name, member in cls.__dict__.items()
               if not name.startswith("_"))


def _made(cls: type, kwargs: Mapping[str, object]) -> object:
    if not kwargs:
        required = [p for name, p in _init_params(cls) if name != "self"
                    and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.default is p.empty]
        if required:
            listed = ", ".join(_shown(p) for p in required)
            example = ", ".join(f"{p.name}=..." for p in required)
            raise TypeError(f"Class '{cls.__name__}' requires constructor arguments ({listed}). "
                            f"Please instantiate it first: register({cls.__name__}({example}), "
                            "source='class')")
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise TypeError(f"Failed to instantiate class '{cls.__name__}' with arguments "
                        f"{kwargs!r}: {exc}. Please pass a pre-constructed instance instead: "
                        f"register({cls.__name__}(...), source='class')") from exc


def _init_params(cls: type) -> list[tuple[str, inspect.Parameter]]:
    try:
        return list(inspect.signature(getattr(cls, "__init__")).parameters.items())  # noqa: B009
    except (TypeError, ValueError):
        return []


def _shown(param: inspect.Parameter) -> str:
    if param.annotation is param.empty:
        return param.name
    kind = param.annotation
    return f"{param.name}: {kind.__name__ if isinstance(kind, type) else kind}"
