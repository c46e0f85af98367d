"""The ``Tool`` protocol agent code writes tools to: any object with ``name``, ``description``,
``input_schema`` and ``async execute(ctx, **kwargs)``, made a toolkeeper tool without
subclassing anything."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from ..core.context import ToolContext
from ..core.results import ToolResult, to_tool_result
from ..core.risk import HitlMode, ToolRisk
from .base import BaseTool

__all__ = ["DeclaresHitlMode", "DeclaresRisk", "ProtocolTool", "SeedTool", "ToolProtocol"]


@runtime_checkable
class ToolProtocol(Protocol):
    """What a local tool written to the ``Tool`` protocol has, without subclassing anything."""

    name: str
    description: str
    input_schema: Mapping[str, object]

    async def execute(self, ctx: ToolContext | None, **kwargs: object) -> object: ...


SeedTool = ToolProtocol
"""The earlier name of ``ToolProtocol``; a compatibility alias that goes away in 0.3.0."""


@runtime_checkable
class DeclaresRisk(Protocol):
    """A protocol tool that also says how risky it is."""

    risk: ToolRisk | str


@runtime_checkable
class DeclaresHitlMode(Protocol):
    """A protocol tool that also says how a person is asked."""

    hitl_mode: HitlMode | str


class ProtocolTool(BaseTool):
    """A ``ToolProtocol`` object as a ``BaseTool``: its schema, its risk (and HITL mode) if it
    declares one, and every call handed to its own ``execute(ctx, **arguments)``."""

    wrapped: ToolProtocol
    """The object whose ``execute`` runs each call."""

    def __init__(self, wrapped: ToolProtocol) -> None:
        self.wrapped = wrapped
        super().__init__(
            name=wrapped.name, description=wrapped.description, input_schema=wrapped.input_schema,
            risk=wrapped.risk if isinstance(wrapped, DeclaresRisk) else None,
            hitl_mode=wrapped.hitl_mode if isinstance(wrapped, DeclaresHitlMode) else None)

    # The wrapped protocol takes its context as ``ctx``, by name as the runner passes it.
    async def execute(self, ctx: ToolContext | None = None,  # type: ignore[override]
                      **kwargs: object) -> ToolResult:
        return to_tool_result(await self.wrapped.execute(ctx, **kwargs))
