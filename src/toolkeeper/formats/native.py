"""The native form: toolkeeper's own complete declaration of a tool."""

from __future__ import annotations

from typing import Any

from ..core.call import ToolCall
from ..core.results import ToolResult
from .base import WireFormat
from .transform import Profile

__all__ = ["NativeFormat"]


class NativeFormat(WireFormat):
    """Everything toolkeeper knows about a tool, unprojected; calls as ``{id, name, arguments}``."""

    name = "native"
    profile = Profile(name="native")

    def declaration(
        self, tool: Any, name: str, parameters: dict[str, Any], strict: bool
    ) -> dict[str, Any]:
        return {**tool.model_dump(), "name": name, "qualified_name": tool.qualified_name,
                "parameters": tool.parameters}

    def extract(self, data: Any) -> list[tuple[str, str, Any]]:
        items = data if isinstance(data, list) else [data]
        out = []
        for item in items:
            if not isinstance(item, dict) or "name" not in item:
                raise self.shape_error(item, "{id, name, arguments} objects")
            out.append((str(item.get("id", "")), item["name"], item.get("arguments")))
        return out

    def render(self, call: ToolCall, result: ToolResult) -> dict[str, Any]:
        return {"id": call.id, "name": call.name, **result.model_dump(mode="json")}
