"""Wire formats: tools out to each provider, calls back in, results out again.

Formats: ``openai-chat``, ``openai-responses`` (also ``openai-response``), ``anthropic``,
``gemini``, ``mcp`` and ``native``.
"""

from .base import WireFormat
from .export import WireExport, export
from .names import WireNames, wire_name
from .problems import Problem
from .registry import (
    API_FORMATS,
    check,
    declare,
    get_format,
    parse_tool_calls,
    render_result,
    render_results,
)

__all__ = [
    "API_FORMATS",
    "Problem",
    "WireExport",
    "WireFormat",
    "WireNames",
    "check",
    "declare",
    "export",
    "get_format",
    "parse_tool_calls",
    "render_result",
    "render_results",
    "wire_name",
]
