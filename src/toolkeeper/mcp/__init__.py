"""MCP: toolkeeper's catalog served to MCP clients, every ``tools/call`` through the invoker.

Needs the ``server`` extra (the MCP SDK): importing any module of this package without it ends
in one line naming the extra. Nothing in the core, and nothing the ``toolkeeper`` command loads
to start, imports this package: the SDK is loaded when a server is built."""

from ..extras import missing

try:
    import mcp  # noqa: F401  (the SDK, which every module here imports)
except ModuleNotFoundError as exc:
    raise missing("server", "toolkeeper's MCP server") from exc
