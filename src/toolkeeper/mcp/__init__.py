"""MCP: toolkeeper's catalog served to MCP clients, every ``tools/call`` through the invoker
(needs the ``mcp`` extra)."""
