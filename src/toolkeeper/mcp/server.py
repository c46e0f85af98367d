"""An MCP server over a catalog, built on the official SDK's low-level ``Server``, so the
catalog and the door stay toolkeeper's: ``tools/list`` is the catalog exported in the ``mcp``
wire format (wire-safe names, annotations from risk, output schemas), and every ``tools/call``
goes through ``ToolInvoker.invoke`` — nothing else runs a tool.

A failure the model should read (unknown tool, invalid arguments, a denial, a timeout, a tool
that raised) is an ``isError`` result with the invoker's message; protocol errors stay for
protocol faults.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

import anyio

from ..formats import WireExport, render_result
from ..invoke.invoker import ToolInvoker
from ..invoke.session import InvokerSession
from ..skills.skill import Skill
from .gateway import MCPGateway

if TYPE_CHECKING:
    import mcp_types as types
    from mcp.server.lowlevel.server import Server

__all__ = ["mcp_server", "serve_stdio"]

TRACE_LIMIT = 10_000
"""A client's session lives as long as the server: its in-memory trace keeps the last records
only (the audit log keeps them all)."""


def mcp_server(invoker: ToolInvoker, *, session: InvokerSession | None = None,
               name: str = "toolkeeper", instructions: str | None = None,
               skills: Sequence[Skill] = (), gateway: MCPGateway | None = None
               ) -> Server[Any]:
    """A low-level MCP ``Server`` offering ``invoker``'s catalog.

    Args:
        invoker: The door every call goes through (its catalog is what is listed).
        session: The session calls count against (budget, trace, session approvals); by
            default one per client for the server's lifetime — the client an HTTP layer put in
            the request's state as ``toolkeeper_client`` (session id ``client-NAME``, which
            the audit log and approval requests record), else one for all.
        name: The server name clients see.
        instructions: Optional instructions for clients.
        skills: Offered as MCP prompts (``prompts/list``, ``prompts/get``): the name, the
            description, and the instructions as the prompt's message.
        gateway: Upstream MCP servers whose tools are in the catalog (entered and attached by
            the caller); a tools/list refreshes those listed more than ``refresh_s`` ago.
    """
    import mcp_types as types  # the SDK takes ~0.8 s to import: only when a server is built
    from mcp.server.lowlevel.server import Server
    from mcp.shared.exceptions import MCPError

    catalog = invoker.registry
    sessions: dict[str, InvokerSession] = {}

    def session_for(ctx: Any) -> InvokerSession:
        if session is not None:
            return session
        state = getattr(getattr(ctx, "request", None), "state", None)
        client = str(getattr(state, "toolkeeper_client", "") or "local")
        found = sessions.get(client)
        if found is None:
            found = sessions[client] = invoker.open_session(session_id=f"client-{client}",
                                                            trace_limit=TRACE_LIMIT)
        return found

    # The export (with the table that maps wire names back) is made when tools are listed and
    # again only when a call names a tool it does not know: exporting on every call cost 3 ms
    # per call at 1,000 tools. A stale table is harmless — a wire name always stands for the
    # same tool name, and the invoker answers a tool that is gone.
    current: list[WireExport] = [catalog.export("mcp")]

    def exported_for(wire: str | None = None) -> WireExport:
        if wire is None or wire not in current[0].names:
            current[0] = catalog.export("mcp")
        return current[0]

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        if gateway is not None:
            await gateway.refresh_stale()
        tools = sorted((types.Tool.model_validate(d) for d in exported_for().declarations),
                       key=lambda t: t.name)
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        exported = exported_for(params.name)
        (call,) = exported.parse({"method": "tools/call", "params": {
            "name": params.name, "arguments": params.arguments or {}}})
        result = await invoker.invoke(call, session=session_for(ctx))
        rendered = render_result(call, result.to_tool_result(), "mcp")
        return types.CallToolResult.model_validate(rendered)

    by_name = {skill.name: skill for skill in skills}

    async def list_prompts(_ctx: Any, _params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[
            types.Prompt(name=s.name, description=s.description or None)
            for s in sorted(by_name.values(), key=lambda s: s.name)])

    async def get_prompt(_ctx: Any, params: types.GetPromptRequestParams
                         ) -> types.GetPromptResult:
        skill = by_name.get(params.name)
        if skill is None:
            known = ", ".join(sorted(by_name)) or "none"
            raise MCPError(code=-32602, message=f"no skill named {params.name!r} "
                                 f"(skills: {known})")
        return types.GetPromptResult(description=skill.description or None, messages=[
            types.PromptMessage(role="user", content=types.TextContent(text=skill.prompt()))])

    prompts: dict[str, Any] = {"on_list_prompts": list_prompts,
                               "on_get_prompt": get_prompt} if by_name else {}
    return Server(name, instructions=instructions, on_list_tools=list_tools,
                  on_call_tool=call_tool, **prompts)


def serve_stdio(invoker: ToolInvoker, *, gateway: MCPGateway | None = None,
                on_report: Callable[[list[str]], None] | None = None, **options: Any) -> None:
    """Serve ``invoker``'s catalog over stdio until the client closes the connection; with a
    ``gateway``, its upstream tools are attached first (``on_report`` gets its report)."""
    from mcp.server.stdio import stdio_server

    server = mcp_server(invoker, gateway=gateway, **options)

    async def run() -> None:
        async with AsyncExitStack() as stack:
            if gateway is not None:
                await stack.enter_async_context(gateway)
                report = await gateway.attach(invoker.registry)
                if on_report is not None:
                    on_report(report)
            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream,
                                 server.create_initialization_options())

    anyio.run(run)
