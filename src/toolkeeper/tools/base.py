"""``BaseTool``: define a tool by subclassing (seed 000)."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from ..core.context import ToolContext
from ..core.metadata import ToolMetadata
from ..core.risk import HitlMode, ToolRisk
from ..errors import UsageError
from .naming import normalize_tool_name
from .signature import inspect_function
from .tool import Tool

__all__ = ["BaseTool"]


class BaseTool(Tool):
    """Subclass to define a tool; set ``risk`` and ``hitl_mode`` as class attributes.

    ``execute`` takes the arguments as keyword-only parameters (plus an optional ``ctx``) and
    returns a ``ToolResult`` or any value ``to_tool_result`` accepts. Without an ``input_schema``,
    the schema comes from ``execute``'s signature and docstring::

        class SendEmailTool(BaseTool):
            risk = ToolRisk.CRITICAL
            hitl_mode = HitlMode.BLOCKING

            def __init__(self):
                super().__init__(name="send_email", description="Send an email",
                                 input_schema={...})

            async def execute(self, *, to: str, subject: str, body: str) -> ToolResult: ...
    """

    def __init__(
        self,
        name: str | None = None,
        description: str | None = None,
        input_schema: Mapping[str, Any] | None = None,
        *,
        metadata: ToolMetadata | None = None,
        namespace: str | None = None,
        risk: ToolRisk | str | None = None,
        hitl_mode: HitlMode | str | None = None,
        output_schema: Mapping[str, Any] | None = None,
    ) -> None:
        cls = type(self)
        if cls.execute is Tool.execute:
            raise UsageError(
                f"{cls.__name__} subclasses BaseTool but does not define "
                "'async def execute(self, *, ...)'"
            )
        tool_name = name or cls.__dict__.get("name") or _snake(cls.__name__)
        info = None
        if input_schema is None:
            info = inspect_function(self.execute, name=tool_name, description=description)
        super().__init__(
            name=tool_name,
            description=description if description is not None else (info.description if info else ""),
            parameters=input_schema,
            callable=self.execute,
            metadata=metadata,
            namespace=namespace,
            risk=risk,
            hitl_mode=hitl_mode,
            output_schema=output_schema,
            _info=info,
        )
        self.__dict__["_ctx_name"] = _ctx_name(self.execute) if info is None else info.ctx_param

    def _ctx_param(self) -> str | None:
        return self.__dict__.get("_ctx_name")


def _ctx_name(method: Any) -> str | None:
    for param in inspect.signature(method).parameters.values():
        annotation = param.annotation
        if param.name == "ctx" or (
            isinstance(annotation, type) and issubclass(annotation, ToolContext)
        ):
            return param.name
    return None


def _snake(class_name: str) -> str:
    base = class_name[:-4] if class_name.endswith("Tool") and len(class_name) > 4 else class_name
    return normalize_tool_name(base)
