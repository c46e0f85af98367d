"""An MCP server over a catalog, built on the official SDK's low-level ``Server``, so the
catalog and the door stay toolkeeper's: ``tools/list`` is the catalog exported in the ``mcp``
wire format (wire-safe names, annotations from risk, output schemas), and every ``tools/call``
goes through ``ToolInvoker.invoke`` — nothing else runs a tool.

A failure the model should read (unknown tool, invalid arguments, a denial, a timeout, a tool
that raised) is an ``isError`` result with the invoker's message; protocol errors stay for
protocol faults.
"""

from __future__ import annotations

import base64
import bisect
import secrets
import weakref
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AsyncExitStack
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

import anyio

from ..core.context import CALLER_KEY, Caller, ToolContext
from ..formats import WireExport, render_result
from ..gateway.gateway import MCPGateway
from ..gateway.relay import calling_client
from ..invoke.invoker import ToolInvoker
from ..invoke.session import InvokerSession
from ..skills.skill import Skill
from .asking import ClientChannel, state_security
from .relay_link import SdkClientLink, SessionHub
from .relayed import RelayedHandlers

if TYPE_CHECKING:
    import mcp_types as types
    from mcp.server.lowlevel.server import Server

__all__ = ["STDIO_CLIENT", "announce_changes", "mcp_server", "serve_stdio"]

STDIO_CLIENT = "stdio"
"""The client of a server without an HTTP layer naming one: the process that launched it."""
STDIO = Caller(client=STDIO_CLIENT, channel="mcp", via="none")
PAGE_SIZE = 500
TRACE_LIMIT = 10_000
"""A client's session lives as long as the server: its in-memory trace keeps the last records
only (the audit log keeps them all)."""


def mcp_server(invoker: ToolInvoker, *, session: InvokerSession | None = None,
               name: str = "toolkeeper", instructions: str | None = None,
               skills: Sequence[Skill] = (), gateway: MCPGateway | None = None,
               page_size: int = PAGE_SIZE, ask_client: str | None = None) -> Server[Any]:
    """A low-level MCP ``Server`` offering ``invoker``'s catalog.

    Args:
        invoker: The door every call goes through (its catalog is what is listed).
        session: The session calls count against (budget, trace, session approvals); by
            default one per client for the server's lifetime — the client an HTTP layer put in
            the request's state as a ``Caller`` (session id ``client-NAME``, which
            the audit log and approval requests record), else ``client-stdio``.
        name: The server name clients see.
        instructions: Optional instructions for clients.
        skills: Offered as MCP prompts (``prompts/list``, ``prompts/get``): the name, the
            description, and the instructions as the prompt's message.
        gateway: Upstream MCP servers whose tools are in the catalog (entered and attached by
            the caller); a tools/list refreshes those listed more than ``refresh_s`` ago.
        page_size: Tools per ``tools/list`` page (in name order; the cursor is opaque).
        ask_client: A secret every replica shares (the operator token): with it, a call that
            needs approval on a 2026-07-28 session also asks the person at the client (an
            ``input_required`` form, see ``asking.py``); the first decision wins.

    A tool that takes a ``ctx`` reports progress with ``ctx.report_progress`` as MCP progress
    notifications when the client asked for them (a ``progressToken``); a client that cancels
    its request cancels the call (recorded as cancelled in the trace and audit log).
    """
    import mcp_types as types  # the SDK takes ~0.8 s to import: only when a server is built
    from mcp.server.lowlevel.server import Server
    from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
    from mcp.shared.exceptions import MCPError

    catalog = invoker.registry
    sessions: dict[str, InvokerSession] = {}

    def caller_of(ctx: Any) -> Caller:
        request = getattr(ctx, "request", None)
        found = getattr(request, "scope", {}).get("state", {}).get(CALLER_KEY)
        return found if isinstance(found, Caller) else STDIO

    def client_of(ctx: Any) -> str:
        return caller_of(ctx).client

    def session_for(ctx: Any) -> InvokerSession:
        if session is not None:
            return session
        caller = caller_of(ctx)
        found = sessions.get(caller.client)
        if found is None:
            found = sessions[caller.client] = invoker.open_session(
                session_id=f"client-{caller.client}", trace_limit=TRACE_LIMIT, caller=caller)
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

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        _remember(server, ctx)
        if gateway is not None:
            await gateway.refresh_stale()
        declarations = sorted(exported_for().declarations, key=lambda d: str(d["name"]))
        cursor = getattr(params, "cursor", None)
        start = 0
        if cursor:
            after = _decode_cursor(cursor)
            if after is None:
                raise MCPError(code=-32602, message="invalid cursor: pass the nextCursor of "
                                                    "the previous page, or none to start over")
            start = bisect.bisect_right([str(d["name"]) for d in declarations], after)
        page = declarations[start:start + page_size]
        more = start + page_size < len(declarations)
        return types.ListToolsResult(
            tools=[types.Tool.model_validate(d) for d in page],
            next_cursor=_encode_cursor(str(page[-1]["name"])) if more and page else None)

    channel = ClientChannel(invoker) if ask_client else None
    hub = SessionHub()
    if gateway is not None and gateway.relay.hub is None:
        gateway.relay.hub = hub

    async def call_tool(ctx: Any, params: types.CallToolRequestParams
                        ) -> types.CallToolResult | types.InputRequiredResult:
        _remember(server, ctx)
        exported = exported_for(params.name)
        (call,) = exported.parse({"method": "tools/call", "id": "mcp_" + secrets.token_urlsafe(9),
                                  "params": {"name": params.name,
                                             "arguments": params.arguments or {}}})
        in_session = session_for(ctx)
        # Progress goes back on this request (the SDK drops it when the client gave no token).
        report = getattr(getattr(ctx, "session", None), "report_progress", None)
        tool_ctx = None if report is None else ToolContext(
            call_id=call.id, tool_name=call.name, session_id=in_session.id,
            state=in_session.state, progress_sink=report, caller=in_session.caller)
        hub.remember(ctx, client_of(ctx))
        with calling_client(SdkClientLink(ctx, client_of(ctx))):  # the gateway's relay
            if channel is not None and str(getattr(ctx, "protocol_version", "")) >= "2026":
                await channel.answer(params, in_session, client_of(ctx))
                outcome = await channel.invoke(call, in_session, tool_ctx)
                if isinstance(outcome, str):
                    return channel.ask(outcome)
                result = outcome
            else:
                result = await invoker.invoke(call, session=in_session, ctx=tool_ctx)
        rendered = render_result(call, result.to_tool_result(), "mcp")
        return types.CallToolResult.model_validate(rendered)

    by_name = {skill.name: skill for skill in skills}
    # The gateway's upstream resources and prompts (beside the skills' prompts).
    relayed = RelayedHandlers(gateway.sources, client_of) if gateway is not None else None

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        upstream = (await relayed.list_prompts(ctx, params)).prompts if relayed else []
        return types.ListPromptsResult(prompts=[
            types.Prompt(name=s.name, description=s.description or None)
            for s in sorted(by_name.values(), key=lambda s: s.name)] + upstream)

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams
                         ) -> types.GetPromptResult:
        skill = by_name.get(params.name)
        if skill is None and relayed is not None and gateway is not None \
                and gateway.sources.serves_prompt(params.name):
            return await relayed.get_prompt(ctx, params)
        if skill is None:
            known = ", ".join(sorted(by_name)) or "none"
            raise MCPError(code=-32602, message=f"no skill named {params.name!r} "
                                 f"(skills: {known})")
        return types.GetPromptResult(description=skill.description or None, messages=[
            types.PromptMessage(role="user", content=types.TextContent(text=skill.prompt()))])

    prompts: dict[str, Any] = {"on_list_prompts": list_prompts,
                               "on_get_prompt": get_prompt} if by_name or relayed else {}
    if relayed is not None:
        prompts = {**relayed.handlers(), **prompts}
    bus = InMemorySubscriptionBus()
    server: Server[Any] = Server(name, version=_version(), instructions=instructions,
                                 on_list_tools=list_tools,
                                 on_call_tool=call_tool,
                                 on_subscriptions_listen=ListenHandler(bus), **prompts)
    _BUSES[server] = bus
    if ask_client:
        from mcp.server.request_state import RequestStateBoundary

        server.middleware.append(RequestStateBoundary(state_security(ask_client, client_of),
                                                      default_audience=name))
    return server


_SESSIONS: weakref.WeakKeyDictionary[Any, weakref.WeakSet[Any]] = weakref.WeakKeyDictionary()
_BUSES: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _remember(server: Any, ctx: Any) -> None:
    """Keep a 2025-11-25 connection (stdio has one) to tell it when the catalog changes
    (2026-07-28 clients listen with ``subscriptions/listen`` instead). The SDK keeps the
    connection behind the request-scoped session."""
    if str(getattr(ctx, "protocol_version", "")) >= "2026":
        return
    connection = getattr(getattr(ctx, "session", None), "_connection", None)
    if connection is not None and hasattr(connection, "send_tool_list_changed"):
        _SESSIONS.setdefault(server, weakref.WeakSet()).add(connection)


async def announce_changes(server: Any, catalog: Any, poll_s: float = 0.2) -> None:
    """Tell clients whenever the catalog's version changes (tools added, removed, enabled or
    disabled): ``notifications/tools/list_changed`` on the 2026-07-28 ``subscriptions/listen``
    streams (stdio and HTTP) and to 2025-11-25 connections that stay open (stdio). Runs until
    cancelled."""
    from mcp.shared.subscriptions import ToolsListChanged

    seen = getattr(catalog, "version", None)
    while True:
        await anyio.sleep(poll_s)
        version = getattr(catalog, "version", None)
        if version == seen:
            continue
        seen = version
        bus = _BUSES.get(server)
        if bus is not None:
            await bus.publish(ToolsListChanged())
        for session in list(_SESSIONS.get(server, ())):
            try:
                await session.send_tool_list_changed()
            except Exception:  # a closed connection or a revision without it: nothing to tell
                continue


def _version() -> str:
    """toolkeeper's version, as clients see it in ``serverInfo``."""
    try:
        return version("toolkeeper")
    except PackageNotFoundError:
        return "0"


def _encode_cursor(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode("utf-8")).decode("ascii")


def _decode_cursor(cursor: str) -> str | None:
    try:
        return base64.urlsafe_b64decode(cursor.encode("ascii")).decode("utf-8")
    except (ValueError, UnicodeError):
        return None


def serve_stdio(invoker: ToolInvoker, *, gateway: MCPGateway | None = None,
                on_report: Callable[[list[str]], None] | None = None,
                alongside: Callable[[], Coroutine[Any, Any, None]] | None = None,
                **options: Any) -> None:
    """Serve ``invoker``'s catalog over stdio until the client closes the connection; with a
    ``gateway``, its upstream tools are attached first (``on_report`` gets its report).
    ``alongside`` runs in the same event loop until then (the approval page)."""
    from mcp.server.lowlevel.server import NotificationOptions
    from mcp.server.stdio import stdio_server

    server = mcp_server(invoker, gateway=gateway, **options)

    async def run() -> None:
        async with AsyncExitStack() as stack:
            if gateway is not None:
                await stack.enter_async_context(gateway)
                report = await gateway.attach(invoker.registry)
                if on_report is not None:
                    on_report(report)
            async with stdio_server() as (read_stream, write_stream), \
                    anyio.create_task_group() as group:
                group.start_soon(announce_changes, server, invoker.registry)
                if alongside is not None:
                    group.start_soon(alongside)
                await server.run(read_stream, write_stream, server.create_initialization_options(
                    NotificationOptions(tools_changed=True)))
                group.cancel_scope.cancel()

    anyio.run(run)
