"""Model Context Protocol: ``tools/list`` entries, ``tools/call`` requests, ``CallToolResult``."""

from __future__ import annotations

from collections.abc import Mapping

from ..core.call import ToolCall
from ..core.json import JsonObject, JsonValue, as_json
from ..core.results import (
    AudioBlock,
    ContentBlock,
    FileBlock,
    ImageBlock,
    JsonBlock,
    ResourceLinkBlock,
    TextBlock,
    ToolResult,
    dump_json,
)
from ..core.risk import ToolRisk
from ..core.spec import ToolSpec
from .base import WireFormat
from .transform import Profile

__all__ = ["MCPFormat", "content_block", "tool_result_from_mcp"]


class MCPFormat(WireFormat):
    """MCP tool declarations (with ``outputSchema`` and annotations) and results."""

    name = "mcp"
    profile = Profile(name="mcp", as_is=True)

    def declaration(
        self, tool: ToolSpec, name: str, parameters: JsonObject, strict: bool
    ) -> JsonObject:
        out: JsonObject = {"name": name}
        if tool.metadata.title:
            out["title"] = tool.metadata.title
        out["description"] = tool.description
        out["inputSchema"] = parameters
        output = tool.output_schema
        if output is not None:
            out["outputSchema"] = {k: v for k, v in output.items()
                                   if k != "x-toolkeeper-wrap-result"}
        annotations: JsonObject = {**_risk_hints(tool), **tool.metadata.mcp_annotations()}
        if annotations:
            out["annotations"] = annotations
        if tool.metadata.task_support != "forbidden":
            out["execution"] = {"taskSupport": tool.metadata.task_support}
        return out

    def extract(self, data: object) -> list[tuple[str, str, object]]:
        if isinstance(data, list):
            return [item for d in data for item in self.extract(d)]
        if not isinstance(data, dict):
            raise self.shape_error(data, "a tools/call request or its params")
        rpc_id = data.get("id")
        params = data.get("params") if "params" in data else data
        if data.get("method") not in (None, "tools/call") or not isinstance(params, dict):
            raise self.shape_error(data, "a tools/call request or its params")
        if "name" not in params:
            raise self.shape_error(params, "tools/call params with a name")
        call_id = str(rpc_id) if rpc_id is not None else "mcp-call"
        return [(call_id, params["name"], params.get("arguments"))]

    def render(self, call: ToolCall, result: ToolResult) -> JsonObject:
        content: list[JsonValue] = [self._block(b) for b in result.content]
        out: JsonObject = {"content": content, "isError": result.is_error}
        if result.structured_content is not None and not result.is_error:
            out["structuredContent"] = as_json(result.structured_content)
        return out

    @staticmethod
    def _block(block: ContentBlock) -> JsonObject:
        if isinstance(block, TextBlock):
            return {"type": "text", "text": block.text}
        if isinstance(block, JsonBlock):
            return {"type": "text", "text": dump_json(block.data)}
        if isinstance(block, ImageBlock | AudioBlock):
            return {"type": block.type, "data": block.data, "mimeType": block.media_type}
        if isinstance(block, ResourceLinkBlock):
            link: JsonObject = {"type": "resource_link", "uri": block.uri, "name": block.name}
            extra: JsonObject = {"description": block.description, "mimeType": block.media_type,
                                 "size": block.size}
            return {**link, **{k: v for k, v in extra.items() if v is not None}}
        assert isinstance(block, FileBlock)
        resource: JsonObject = {"uri": block.uri or f"toolkeeper://file/{block.name or 'file'}",
                                "mimeType": block.media_type}
        if block.text is not None:
            resource["text"] = block.text
        else:
            resource["blob"] = block.data or ""
        return {"type": "resource", "resource": resource}


def content_block(block: ContentBlock) -> JsonObject:
    """One content block as MCP content (a ``FileBlock`` as an embedded resource)."""
    return MCPFormat._block(block)


def _risk_hints(tool: ToolSpec) -> dict[str, bool]:
    """Annotations the risk implies, for hints the tool does not set itself: SAFE reads only,
    HIGH and CRITICAL may destroy (clients treat annotations as hints, never as guarantees)."""
    if tool.risk is ToolRisk.SAFE:
        return {"readOnlyHint": True}
    if tool.risk >= ToolRisk.HIGH:
        return {"readOnlyHint": False, "destructiveHint": True}
    return {"readOnlyHint": False}


def tool_result_from_mcp(data: Mapping[str, object]) -> ToolResult:
    """A ``CallToolResult`` (as JSON data) back as a ``ToolResult``: the inverse of ``render``
    (an embedded resource becomes a ``FileBlock``; an unknown block type a note in text)."""
    found = data.get("content")
    blocks = [_block_from_mcp(b) for b in (found if isinstance(found, list) else ())]
    structured = data.get("structuredContent")
    is_error = bool(data.get("isError"))
    return ToolResult(content=tuple(blocks), is_error=is_error,
                      structured_content=structured if isinstance(structured, dict) else None,
                      error_code="tool_raised" if is_error else None)


def _block_from_mcp(block: object) -> ContentBlock:
    """One MCP content block as a toolkeeper block; an unknown type as a note in text."""
    kind = block.get("type") if isinstance(block, dict) else None
    if not isinstance(block, dict):
        return TextBlock(text=f"[unsupported MCP content type {kind!r}]")
    if kind == "text":
        return TextBlock(text=str(block.get("text", "")))
    if kind in ("image", "audio"):
        cls = ImageBlock if kind == "image" else AudioBlock
        return cls(data=str(block.get("data", "")),
                   media_type=str(block.get("mimeType") or "application/octet-stream"))
    if kind == "resource_link":
        return ResourceLinkBlock(
            uri=str(block.get("uri", "")), name=str(block.get("name", "")),
            description=block.get("description"), media_type=block.get("mimeType"),
            size=block.get("size"))
    resource = block.get("resource")
    if kind == "resource" and isinstance(resource, dict):
        return FileBlock(uri=resource.get("uri"), text=resource.get("text"),
                         data=resource.get("blob"),
                         media_type=resource.get("mimeType") or "text/plain")
    return TextBlock(text=f"[unsupported MCP content type {kind!r}]")
