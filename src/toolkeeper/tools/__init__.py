"""Tool definitions: ``Tool``, ``BaseTool``, ``@tool``, hosted and provider-defined tools, results."""

from ..core.context import ToolContext
from ..core.metadata import ToolMetadata
from ..core.results import (
    AudioBlock,
    ContentBlock,
    FileBlock,
    ImageBlock,
    JsonBlock,
    ResourceLinkBlock,
    TextBlock,
    ToolExecutionResult,
    ToolResult,
    to_tool_result,
)
from ..core.risk import HitlMode, ToolRisk, default_hitl_mode
from .base import BaseTool
from .decorator import tool
from .hosted import (
    FunctionSpec,
    HostedTool,
    ProviderDefinedTool,
    ProviderSpec,
    is_hosted_tool,
    is_provider_defined_tool,
)
from .naming import normalize_tool_name
from .rawschema import SchemaWarning
from .tool import Tool

__all__ = [
    "AudioBlock",
    "BaseTool",
    "ContentBlock",
    "FileBlock",
    "FunctionSpec",
    "HitlMode",
    "HostedTool",
    "ImageBlock",
    "JsonBlock",
    "ProviderDefinedTool",
    "ProviderSpec",
    "ResourceLinkBlock",
    "SchemaWarning",
    "TextBlock",
    "Tool",
    "ToolContext",
    "ToolExecutionResult",
    "ToolMetadata",
    "ToolResult",
    "ToolRisk",
    "default_hitl_mode",
    "is_hosted_tool",
    "is_provider_defined_tool",
    "normalize_tool_name",
    "to_tool_result",
    "tool",
]
