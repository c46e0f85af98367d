"""The native form: toolkeeper's own complete declaration of a tool."""

from __future__ import annotations

from ..core.call import ToolCall
from ..core.json import JsonObject
from ..core.results import ToolResult
from ..core.spec import ToolSpec
from .base import WireFormat
from .transform import Profile

__all__ = ["NativeFormat"]


class NativeFormat(WireFormat):
    """Everything toolkeeper knows about a tool, unprojected; calls as ``{id, name, arguments}``."""

    name = "native"
    profile = Profile(name="native")

    def declaration(
        self, tool: ToolSpec, name: str, parameters: JsonObject, strict: bool
    ) -> JsonObject:
        return {"name": name, "description": tool.description,
                "parameters": dict(tool.parameters),
                "output_schema": None if tool.output_schema is None else dict(tool.output_schema),
                "namespace": tool.namespace, "method_name": tool.method_name,
                "qualified_name": tool.qualified_name, "risk": tool.risk.value,
                "hitl_mode": tool.hitl_mode.value,
                "metadata": tool.metadata.model_dump(mode="json", by_alias=False)}

    def extract(self, data: object) -> list[tuple[str, str, object]]:
        items = data if isinstance(data, list) else [data]
        out = []
        for item in items:
            if not isinstance(item, dict) or "name" not in item:
                raise self.shape_error(item, "{id, name, arguments} objects")
            out.append((str(item.get("id", "")), item["name"], item.get("arguments")))
        return out

    def render(self, call: ToolCall, result: ToolResult) -> JsonObject:
        return {"id": call.id, "name": call.name, **result.model_dump(mode="json")}
