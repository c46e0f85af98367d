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
import warnings
import weakref
from collections.abc import Callable, Coroutine, Sequence
from functools import partial
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any, cast

import anyio

from ..codemode.chain import ToolChainTool
from ..core.context import Caller, ToolContext
from ..extras import require
from ..formats import WireExport, render_result
from ..gateway.gateway import STALE_WAIT_S, MCPGateway, attach_upstreams
from ..gateway.relay import calling_client
from ..gateway.sources import RESOURCE_PREFIX
from ..hooks import HookEvent, HookManager
from ..invoke.invoker import ToolInvoker
from ..invoke.session import InvokerSession
from ..skills.skill import Skill
from .asking import ClientChannel, state_security
from .changes import BUSES, announce_changes, declare_changes, remember
from .client_link import Levels, MCPClientLink, answers_of, next_round
from .offer_handlers import (
    MISSING_CAPABILITY,
    NO_WAY_BACK,
    STDIO_CLIENT,
    OfferHandlers,
    caller_of,
    client_of,
)
from .prompts import Prompt, Prompts
from .relay_link import SdkClientLink, SessionHub
from .relayed import RelayedHandlers
from .resources import Resource, Resources, artifact_link
from .stdio import run_stdio

if TYPE_CHECKING:
    import mcp_types as types
    from mcp.server.lowlevel.server import Server

__all__ = ["STDIO_CLIENT", "MCPFace", "announce_changes", "close_sessions", "mcp_server",
           "release_artifacts", "serve_stdio", "stop_calls", "stopped_text"]

PAGE_SIZE = 500
TRACE_LIMIT = 10_000
"""A client's session lives as long as the server: its in-memory trace keeps the last records
only (the audit log keeps them all)."""


def mcp_server(invoker: ToolInvoker, *, session: InvokerSession | None = None,
               name: str = "toolkeeper", instructions: str | None = None,
               skills: Sequence[Skill] = (), gateway: MCPGateway | None = None,
               page_size: int = PAGE_SIZE, ask_client: str | None = None,
               offers: Sequence[Resource | Prompt] = (),
               state_secret: str | None = None) -> Server[Any]:
    """A low-level MCP ``Server`` offering ``invoker``'s catalog.

    Args:
        invoker: The door every call goes through (its catalog is what is listed).
        session: The session calls count against (budget, trace, session approvals); by
            default one per client for the server's lifetime — the client an HTTP layer put in
            the request's state as a ``Caller`` (session id ``client-NAME``, which
            the audit log and approval requests record), else ``client-stdio``.
        name: The server name clients see.
        instructions: Optional instructions for clients.
        skills: Offered as MCP prompts (``prompts/list``, ``prompts/get``: the instructions,
            their ``arguments`` filled in) and as resources (``toolkeeper://skill/NAME``).
        gateway: Upstream MCP servers whose tools are in the catalog (entered and attached by
            the caller); a tools/list refreshes those listed more than ``refresh_s`` ago.
        page_size: Tools per ``tools/list`` page (in name order; the cursor is opaque).
        ask_client: A secret every replica shares (the operator token): with it, a call that
            needs approval on a 2026-07-28 session also asks the person at the client (an
            ``input_required`` form, see ``asking.py``); the first decision wins.
        offers: Resources, resource templates and prompts declared with ``@resource`` and
            ``@prompt``. The artifacts a client's calls stored are its resources too
            (``toolkeeper://artifact/…``), never another client's.
        state_secret: The key ``requestState`` is sealed under, shared by every replica (the
            operator token); by default ``ask_client``, else one made for this process.

    A tool that takes a ``ctx`` reports progress with ``ctx.report_progress`` as MCP progress
    notifications when the client asked for them (a ``progressToken``), logs with ``ctx.log``
    and asks the client with ``ctx.sample`` and ``ctx.elicit``; a client that cancels its
    request cancels the call (recorded as cancelled in the trace and audit log).
    """
    require("server", "an MCP server")
    return MCPFace(invoker, session=session, skills=skills, gateway=gateway,
                   page_size=page_size, ask_client=ask_client, offers=offers,
                   state_secret=state_secret).build(name, instructions)


class MCPFace(OfferHandlers):
    """The handlers of one MCP server over one invoker: each MCP method a named method (the
    tools' here, the prompts', resources', completion's and logging's in ``OfferHandlers``)."""

    def __init__(self, invoker: ToolInvoker, *, session: InvokerSession | None,
                 skills: Sequence[Skill], gateway: MCPGateway | None, page_size: int,
                 ask_client: str | None, offers: Sequence[Resource | Prompt],
                 state_secret: str | None = None) -> None:
        self.invoker, self.catalog, self.fixed_session = invoker, invoker.registry, session
        self.state_secret = state_secret
        self.gateway, self.page_size, self.ask_client = gateway, page_size, ask_client
        self.sessions: dict[str, InvokerSession] = {}
        # The export (with the table that maps wire names back) is made when tools are listed
        # and again only when a call names a tool it does not know: exporting on every call
        # cost 3 ms per call at 1,000 tools. A stale table is harmless — a wire name always
        # stands for the same tool name, and the invoker answers a tool that is gone.
        self.current: WireExport = self.catalog.export("mcp")
        self._exported_at = getattr(self.catalog, "version", None)
        self._sorted: tuple[WireExport | None, list[dict[str, Any]], list[str]] = (None, [], [])
        self.channel = ClientChannel(invoker) if ask_client else None
        self.resources = Resources([o for o in offers if isinstance(o, Resource)],
                                   skills=skills, store=invoker.artifact_store)
        self.prompts = Prompts([o for o in offers if isinstance(o, Prompt)], skills=skills)
        self.levels = Levels()
        self.subscribed: dict[str, set[str]] = {}
        self.server: Any = None
        self.calling: dict[str, MCPClientLink] = {}
        """The calls in flight, by call id: a call that waits for approval tells its client."""
        self.running: dict[str, anyio.CancelScope] = {}
        """Their cancel scopes: ``stop_calls`` ends them (a server stopping)."""
        # The gateway's upstreams: their resources and prompts beside ours, and what they say
        # or ask during a relayed call passed on to the client that made it.
        self.hub = SessionHub()
        if gateway is not None and gateway.relay.hub is None:
            gateway.relay.hub = self.hub
        self.relayed = RelayedHandlers(gateway.sources, client_of) if gateway else None
        service = invoker.approvals
        if service.hooks is None:
            service.hooks = HookManager()
        service.hooks.register(HookEvent.APPROVAL_REQUESTED, self.approval_asked)

    def build(self, name: str, instructions: str | None, *, announces: bool = True
              ) -> Server[Any]:
        """The SDK's server of these handlers. ``announces``: its connections stay open, so it
        tells them of list changes (stdio, HTTP with sessions) — declared so at the handshake."""
        from mcp.server.lowlevel.server import Server
        from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
        from mcp.shared.exceptions import MCPDeprecationWarning

        bus = InMemorySubscriptionBus()
        with warnings.catch_warnings():  # logging is deprecated in 2026-07-28, current before
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            server: Server[Any] = Server(
                name, version=_version(), instructions=instructions,
                on_list_tools=self.list_tools, on_call_tool=self.call_tool,
                on_list_prompts=self.list_prompts, on_get_prompt=self.get_prompt,
                on_list_resources=self.list_resources, on_read_resource=self.read_resource,
                on_list_resource_templates=self.list_resource_templates,
                on_subscribe_resource=self.subscribe, on_unsubscribe_resource=self.unsubscribe,
                on_completion=self.complete, on_set_logging_level=self.set_level,
                on_subscriptions_listen=ListenHandler(bus))
        self.server = server
        BUSES[server] = bus
        _FACES[server] = self
        self.hub.bus = bus  # the upstreams' resource and prompt changes, to listeners too
        declare_changes(server, tools=announces, relayed=announces and self.gateway is not None)
        from mcp.server.request_state import RequestStateBoundary

        # requestState (an approval asked at the client, a tool's earlier answers) is sealed
        # and bound to its client: under the shared secret, else one of this process's own.
        secret = self.ask_client or self.state_secret or secrets.token_hex(32)
        server.middleware.append(RequestStateBoundary(state_security(secret, client_of),
                                                      default_audience=name))
        return server

    def session_for(self, ctx: Any) -> InvokerSession:
        if self.fixed_session is not None:
            return self.fixed_session
        caller = caller_of(ctx)
        found = self.sessions.get(caller.client)
        if found is None:
            found = self.sessions[caller.client] = self.invoker.open_session(
                session_id=f"client-{caller.client}", trace_limit=TRACE_LIMIT, caller=caller)
        return found

    def exported_for(self, wire: str | None = None) -> WireExport:
        """The catalog's MCP export, made again when the catalog changed (or, for a catalog
        that does not count its changes, at every listing) or a call names an unknown tool."""
        version = getattr(self.catalog, "version", None)
        if (wire is None and (version is None or version != self._exported_at)) or (
                wire is not None and wire not in self.current.names):
            self.current, self._exported_at = self.catalog.export("mcp"), version
        return self.current

    def listing(self) -> tuple[list[dict[str, Any]], list[str]]:
        """The declarations in name order and their names, sorted once per export: a page of
        ``tools/list`` is a bisection and a slice, not a sort of the whole catalog."""
        exported = self.exported_for()
        if self._sorted[0] is not exported:
            declarations = sorted(exported.declarations, key=lambda d: str(d["name"]))
            self._sorted = (exported, declarations, [str(d["name"]) for d in declarations])
        return self._sorted[1], self._sorted[2]

    async def approval_asked(self, _event: HookEvent, payload: dict[str, Any]) -> None:
        """A call of this server's waits for a person's decision: a log line to its client."""
        request = payload.get("request") or {}
        link = self.calling.get(str(request.get("call_id")))
        if link is not None:
            where = self.invoker.approvals.where(str(request.get("id")))
            await _quietly(link.log("notice", f"{request.get('tool')}: waiting for approval "
                                              f"(request {request.get('id')}): {where}",
                                    "toolkeeper.approval"))

    async def list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        import mcp_types as types
        from mcp.shared.exceptions import MCPError

        remember(self.server, ctx)
        if self.gateway is not None:
            await self.gateway.refresh_stale(wait_s=STALE_WAIT_S)  # a slow upstream: its own
        # an export of a large catalog takes a while: off the event loop, where other
        # clients' calls are answered
        declarations, names = await anyio.to_thread.run_sync(self.listing)
        caller = caller_of(ctx) if self.fixed_session is None else self.fixed_session.caller
        if caller.tools is not None:  # an access token's scopes: only the tools they cover
            table = self.current.names
            shown = [i for i, wire in enumerate(names) if caller.may_use(table.name(wire))]
            declarations = [self._as_seen(declarations[i], table.name(names[i]), caller)
                            for i in shown]
            names = [names[i] for i in shown]
        cursor = getattr(params, "cursor", None)
        start = 0
        if cursor:
            after = _decode_cursor(cursor)
            if after is None:
                raise MCPError(code=-32602, message="invalid cursor: pass the nextCursor of "
                                                    "the previous page, or none to start over")
            start = bisect.bisect_right(names, after)
        page = declarations[start:start + self.page_size]
        more = start + self.page_size < len(declarations)
        return types.ListToolsResult(
            tools=[types.Tool.model_validate(d) for d in page],
            next_cursor=_encode_cursor(str(page[-1]["name"])) if more and page else None)

    def _as_seen(self, declaration: dict[str, Any], name: str, caller: Caller
                 ) -> dict[str, Any]:
        """A declaration as a caller limited to some tools reads it: code mode's lists only
        the tools that caller may call."""
        tool = self.catalog.get(name)
        if isinstance(tool, ToolChainTool):
            return {**declaration, "description": tool.description_for(caller)}
        return declaration

    async def call_tool(self, ctx: Any, params: types.CallToolRequestParams
                        ) -> types.CallToolResult | types.InputRequiredResult:
        import mcp_types as types
        from mcp.shared.exceptions import MCPError

        remember(self.server, ctx)
        exported = self.exported_for(params.name)
        if self.gateway is not None and params.name not in exported.names:
            await self.gateway.listed(params.name)  # an upstream's, named before it is listed
            exported = self.exported_for(params.name)
        (call,) = exported.parse({"method": "tools/call", "id": "mcp_" + secrets.token_urlsafe(9),
                                  "params": {"name": params.name,
                                             "arguments": params.arguments or {}}})
        in_session = self.session_for(ctx)
        answers = answers_of(params) if str(getattr(ctx, "protocol_version", "")) >= "2026" \
            else {}
        link = MCPClientLink(ctx, client=client_of(ctx), levels=self.levels,
                             audit=self.invoker.audit, call_id=call.id, tool=call.name,
                             session_id=in_session.id, answers=answers)
        # Progress goes back on this request (the SDK drops it when the client gave no token).
        tool_ctx = ToolContext(
            call_id=call.id, tool_name=call.name, session_id=in_session.id,
            state=in_session.state, client=link,  # this request's caller (its token's scopes)
            caller=in_session.caller if self.fixed_session is not None else caller_of(ctx),
            progress_sink=getattr(getattr(ctx, "session", None), "report_progress", None))
        self.calling[call.id] = link
        self.running[call.id] = scope = anyio.CancelScope()
        self.hub.remember(ctx, client_of(ctx))
        try:
            with scope, calling_client(SdkClientLink(ctx, client_of(ctx))):  # the gateway's relay
                if self.channel is not None and \
                        str(getattr(ctx, "protocol_version", "")) >= "2026":
                    await self.channel.answer(params, in_session, client_of(ctx))
                    outcome = await self.channel.invoke(call, in_session, tool_ctx)
                    if isinstance(outcome, str):
                        return self.channel.ask(outcome)
                    result = outcome
                else:
                    result = await self.invoker.invoke(call, session=in_session, ctx=tool_ctx)
        finally:
            self.calling.pop(call.id, None)
            self.running.pop(call.id, None)
        if scope.cancelled_caught:  # the server stopped it
            return types.CallToolResult(content=[types.TextContent(text=stopped_text(call.name))],
                                        is_error=True)
        if link.unreachable:
            raise MCPError(code=NO_WAY_BACK, message=link.unreachable)
        if link.missing:
            raise MCPError(code=MISSING_CAPABILITY, message=f"tool {call.name!r} needs the "
                           f"client capabilities {sorted(link.missing)}; declare them",
                           data={"requiredCapabilities": link.missing})
        if link.asked:
            return next_round(link.asked, answers)
        if result.status == "denied":
            await _quietly(link.log("warning", f"{call.name}: {result.to_tool_result().text}",
                                    "toolkeeper.approval"))
        rendered = render_result(call, result.to_tool_result(), "mcp")
        for stored in result.files:
            self.resources.remember(stored.artifact_ref, name=stored.path,
                                    mime_type=stored.media_type, size=stored.size)
        if result.artifact_ref is not None and self.resources.store is not None:
            self.resources.remember(result.artifact_ref, name=f"{call.name} result",
                                    mime_type="text/plain", size=result.artifact_size)
            rendered = {**rendered, "content": [*cast(list[Any], rendered["content"]),
                                                artifact_link(call.name, result.artifact_ref,
                                                              result.artifact_size)]}
        return types.CallToolResult.model_validate(rendered)

    def stop_calls(self) -> int:
        """Cancel every call in flight (a server stopping, its drain over): each is recorded as
        cancelled and answered with ``stopped_text``. Returns how many."""
        scopes = list(self.running.values())
        for scope in scopes:
            scope.cancel()
        return len(scopes)

    # -- the gateway's upstream resources and prompts, beside this server's own ------------

    async def list_prompts(self, ctx: Any, params: Any) -> types.ListPromptsResult:
        listed = await super().list_prompts(ctx, params)
        if self.relayed is None:
            return listed
        upstream = await self.relayed.list_prompts(ctx, params)
        return listed.model_copy(update={"prompts": [*listed.prompts, *upstream.prompts]})

    async def get_prompt(self, ctx: Any, params: types.GetPromptRequestParams
                         ) -> types.GetPromptResult | types.InputRequiredResult:
        if self.relayed is not None and self.relayed.sources.serves_prompt(params.name):
            return await self.relayed.get_prompt(ctx, params)
        return await super().get_prompt(ctx, params)

    async def list_resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        listed = await super().list_resources(ctx, params)
        if self.relayed is None:
            return listed
        upstream = await self.relayed.list_resources(ctx, params)
        return listed.model_copy(update={"resources": [*listed.resources,
                                                       *upstream.resources]})

    async def list_resource_templates(self, ctx: Any, params: Any
                                      ) -> types.ListResourceTemplatesResult:
        listed = await super().list_resource_templates(ctx, params)
        if self.relayed is None:
            return listed
        upstream = await self.relayed.list_resource_templates(ctx, params)
        return listed.model_copy(update={"resource_templates": [
            *listed.resource_templates, *upstream.resource_templates]})

    async def read_resource(self, ctx: Any, params: types.ReadResourceRequestParams
                            ) -> types.ReadResourceResult:
        # the gateway's namespace: it names what is wrong with a URI no upstream serves
        if self.relayed is not None and str(params.uri).startswith(RESOURCE_PREFIX):
            return await self.relayed.read_resource(ctx, params)
        return await super().read_resource(ctx, params)

    async def subscribe(self, ctx: Any, params: Any) -> types.EmptyResult:
        if self.relayed is not None and self.relayed.sources.serves_resource(str(params.uri)):
            return await self.relayed.subscribe(ctx, params)
        return await super().subscribe(ctx, params)

    async def unsubscribe(self, ctx: Any, params: Any) -> types.EmptyResult:
        if self.relayed is not None and self.relayed.sources.serves_resource(str(params.uri)):
            return await self.relayed.unsubscribe(ctx, params)
        return await super().unsubscribe(ctx, params)

    async def complete(self, ctx: Any, params: types.CompleteRequestParams
                       ) -> types.CompleteResult:
        ref = params.ref
        upstream = self.relayed is not None and (
            self.relayed.sources.serves_prompt(str(getattr(ref, "name", "")))
            if getattr(ref, "type", "") == "ref/prompt"
            else self.relayed.sources.serves_resource(str(getattr(ref, "uri", ""))))
        if upstream and self.relayed is not None:
            return await self.relayed.complete(ctx, params)
        return await super().complete(ctx, params)


def stopped_text(tool: str) -> str:
    """What a call the server cancelled as it stopped answers (after a moment to finish)."""
    return (f"the server stopped before the call of {tool!r} finished: it was cancelled, and "
            "may have partly run. Call it again when the server is back.")


async def _quietly(told: Coroutine[Any, Any, None]) -> None:
    """Tell the client a line; a client that cannot hear it does not fail the call."""
    try:
        await told
    except Exception:  # a closed stream or a revision without logging
        return


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


_FACES: weakref.WeakKeyDictionary[Any, MCPFace] = weakref.WeakKeyDictionary()


async def close_sessions(server: Any) -> None:
    """Close the client sessions of the MCP server ``server`` (as a server stops): each writes
    its audit summary (refused calls counted past ``max_audit_rows``) and unpins its
    artifacts."""
    face = _FACES.get(server)
    if face is None:
        return
    sessions, face.sessions = list(face.sessions.values()), {}
    with anyio.CancelScope(shield=True):
        for session in sessions:
            await session.close()


def stop_calls(server: Any) -> int:
    """Cancel the calls in flight of the MCP server ``server`` (``MCPFace.stop_calls``)."""
    face = _FACES.get(server)
    return face.stop_calls() if face is not None else 0


def release_artifacts(older_than_s: float, server: Any = None) -> int:
    """Unpin the artifacts the client sessions of the MCP server ``server`` (by default, of
    every one in this process) stored more than ``older_than_s`` seconds ago — a client's
    session lives as long as its server: their clients read them no more, and the store's gc
    may remove them. Returns how many."""
    faces = [_FACES[server]] if server in _FACES else [] if server is not None else \
        list(_FACES.values())
    return sum(session.release(older_than_s)
               for face in faces for session in list(face.sessions.values()))


def serve_stdio(invoker: ToolInvoker, *, gateway: MCPGateway | None = None,
                on_report: Callable[[list[str]], None] | None = None,
                alongside: Callable[[], Coroutine[Any, Any, None]] | None = None,
                until: Callable[[], Coroutine[Any, Any, None]] | None = None,
                drain_s: float = 1.0, on_ready: Callable[[], None] | None = None,
                **options: Any) -> None:
    """Serve ``invoker``'s catalog over stdio until the client closes the connection, or
    ``until`` returns (a stop signal): then what the client asked is answered (a call waiting
    for a person: ``pending``) and calls still running after ``drain_s`` seconds are cancelled
    and answered so (``stdio.py``). With a ``gateway``, its upstream tools are attached
    meanwhile (``attach_upstreams``: the local tools are served at once; ``on_report`` gets
    its report). ``alongside`` runs in the same event loop until then (the approval page).
    ``on_ready`` is called once the server is built, just before it serves."""
    server = mcp_server(invoker, gateway=gateway, **options)
    beside: list[Callable[[], Coroutine[Any, Any, None]]] = [
        partial(announce_changes, server, invoker.registry)]
    if gateway is not None:
        beside.append(partial(attach_upstreams, gateway, invoker.registry, on_report))
    if alongside is not None:
        beside.append(alongside)
    if on_ready is not None:
        on_ready()

    async def run() -> None:
        await run_stdio(server, server.create_initialization_options(), beside=beside, until=until,
            drain_s=drain_s, stop_calls=_FACES[server].stop_calls, context=gateway)
        await close_sessions(server)

    anyio.run(run)
