"""What the official MCP client hands back, read the way a test expects it."""

from __future__ import annotations

from mcp import types


def text_of(block: object) -> str:
    """The text of a content block the test expects to be text (fails naming what came)."""
    assert isinstance(block, types.TextContent | types.TextResourceContents), block
    return block.text
