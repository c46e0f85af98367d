"""The ``@tool`` decorator."""

from __future__ import annotations

from collections.abc import Callable
from typing import overload

from ..core.metadata import ToolMetadata
from ..core.risk import HitlMode, ToolRisk
from .tool import Tool

__all__ = ["tool"]


@overload
def tool(func: Callable[..., object], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    namespace: str | None = None,
    risk: ToolRisk | str | None = None,
    hitl_mode: HitlMode | str | None = None,
    metadata: ToolMetadata | None = None,
    preflight: Callable[..., object] | None = None,
    **metadata_fields: object,
) -> Callable[[Callable[..., object]], Tool]: ...


def tool(
    func: Callable[..., object] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    namespace: str | None = None,
    risk: ToolRisk | str | None = None,
    hitl_mode: HitlMode | str | None = None,
    metadata: ToolMetadata | None = None,
    preflight: Callable[..., object] | None = None,
    **metadata_fields: object,
) -> Tool | Callable[[Callable[..., object]], Tool]:
    """Turn a function into a ``Tool``; usable bare (``@tool``) or with options (``@tool(...)``).

    ``preflight``: the tool's pre-flight check (``Tool.preflight``), run with a call's
    validated arguments before a person is asked; it raises what the tool would raise for them.
    Extra keyword arguments are ``ToolMetadata`` fields (``tags=``, ``category=``, ``timeout=``…).
    The decorated name is a ``Tool`` that can still be called like the function.
    """
    if metadata_fields:
        base = metadata.model_dump() if metadata else {}
        metadata = ToolMetadata(**{**base, **metadata_fields})

    def wrap(fn: Callable[..., object]) -> Tool:
        return Tool.from_function(
            fn, name=name, description=description, namespace=namespace, metadata=metadata,
            risk=risk, hitl_mode=hitl_mode, preflight=preflight,
        )

    return wrap(func) if func is not None else wrap
