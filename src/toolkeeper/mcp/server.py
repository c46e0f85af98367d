"""An MCP server over a catalog, built on the official SDK's low-level ``Server``, so the
catalog and the door stay toolkeeper's: ``tools/list`` is the catalog exported in the ``mcp``
wire format (wire-safe names, annotations from risk, output schemas), and every ``tools/call``
goes through ``ToolInvoker.invoke`` — nothing else runs a tool.

A failure the model should read (unknown tool, invalid arguments, a denial, a timeout, a tool
that raised) is an ``isError`` result with the invoker's message; protocol errors stay for
protocol faults.
"""

from __future__ import annotations

import secrets
import warnings
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from importlib.metadata import PackageNotFoundError, version
from typing import Any, cast

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary
from mcp.server.subscriptions import ListenHandler
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from ..codemode.chain import ToolChainTool
from ..core.call import ToolCall
from ..core.context import Caller, ToolContext
from ..formats import render_result
from ..gateway.gateway import STALE_WAIT_S, MCPGateway, attach_upstreams
from ..gateway.relay import ClientSessions, calling_client
from ..hooks import HookEvent
from ..invoke.invoker import ToolInvoker
from ..invoke.results import InvocationResult
from ..invoke.session import InvokerSession
from ..offers.prompts import Prompt, Prompts
from ..offers.resources import Resource, Resources, artifact_link
from ..skills.skill import Skill
from .asking import ClientChannel, state_security
from .changes import Changes
from .client_link import Levels, MCPClientLink, answers_of, next_round
from .exported import Exported, page_of
from .legacy_tasks import LegacyTasks
from .offer_handlers import MISSING_CAPABILITY, NO_WAY_BACK, STDIO_CLIENT, caller_of, client_of
from .page_link import MCP_CALL, PageLinks, quietly, waiting_call
from .relay_link import SdkClientLink
from .relayed import RelayedHandlers
from .relayed_offers import RelayedOffers
from .stdio import run_stdio
from .task_store import TaskStore
from .task_wire import store_of
from .tasks import Tasks
from .tool_search import ToolSearch
from .wire import Ctx, call_id, era_of, modern

__all__ = ["STDIO_CLIENT", "FaceServer", "MCPFace", "announce_changes", "close_sessions", "mcp_server",
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
               state_secret: str | None = None) -> FaceServer:
    """A low-level MCP ``Server`` offering ``invoker``'s catalog (``MCPFace(...).server``).

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
        state_secret: The key ``requestState`` is sealed under, shared by every replica
            (``toolkeeper serve`` keeps one in the store); by default ``ask_client``, else one
            made for this process.

    A tool that takes a ``ctx`` reports progress with ``ctx.report_progress`` as MCP progress
    notifications when the client asked for them (a ``progressToken``), logs with ``ctx.log``
    and asks the client with ``ctx.sample`` and ``ctx.elicit``; a client that cancels its
    request cancels the call (recorded as cancelled in the trace and audit log).
    """
    return MCPFace(invoker, session=session, skills=skills, gateway=gateway,
                   page_size=page_size, ask_client=ask_client, offers=offers,
                   state_secret=state_secret, name=name, instructions=instructions).server


class FaceServer(Server[dict[str, Any]]):
    """The SDK's low-level ``Server`` of one ``MCPFace``, which it names (``face``): what is
    done to a server built by ``mcp_server`` (``announce_changes``, ``stop_calls``) is done to
    its face, found here rather than in a table of every server in the process."""

    def __init__(self, face: MCPFace, name: str, **options: Any) -> None:
        super().__init__(name, **options)
        self.face = face

    def create_initialization_options(self, notification_options: NotificationOptions | None
                                      = None, *more: Any, **named: Any) -> InitializationOptions:
        """The handshake declares the list changes the face tells (``Changes.told``)."""
        return super().create_initialization_options(
            notification_options or self.face.changes.told, *more, **named)


class MCPFace(RelayedOffers):
    """The handlers of one MCP server over one invoker: each MCP method a named method (the
    tools' here, the prompts', resources', completion's and logging's in ``OfferHandlers``),
    and the SDK's ``Server`` that calls them (``server``), built with the face."""

    def __init__(self, invoker: ToolInvoker, *, session: InvokerSession | None = None,
                 skills: Sequence[Skill] = (), gateway: MCPGateway | None = None,
                 page_size: int = PAGE_SIZE, ask_client: str | None = None,
                 offers: Sequence[Resource | Prompt] = (), state_secret: str | None = None,
                 name: str = "toolkeeper", instructions: str | None = None,
                 announces: bool = True, tool_search: bool = False) -> None:
        self.invoker, self.catalog, self.fixed_session = invoker, invoker.registry, session
        self.state_secret = state_secret
        self.gateway, self.page_size, self.ask_client = gateway, page_size, ask_client
        self.sessions: dict[str, InvokerSession] = {}
        # The export (with the table that maps wire names back) is made when tools are listed
        # and again only when a call names a tool it does not know: exporting on every call
        # cost 3 ms per call at 1,000 tools. A stale table is harmless — a wire name always
        # stands for the same tool name, and the invoker answers a tool that is gone.
        self.exported = Exported(self.catalog)
        """The catalog's MCP export, once per catalog version, for every part that reads it."""
        self.channel = ClientChannel(invoker) if ask_client else None
        self.pages = PageLinks(invoker)  # the link to a waiting call's card (page_link.py)
        self.resources = Resources([o for o in offers if isinstance(o, Resource)],
                                   skills=skills, store=invoker.artifact_store)
        self.prompts = Prompts([o for o in offers if isinstance(o, Prompt)], skills=skills)
        self.levels = Levels()
        self.subscribed: dict[str, set[str]] = {}
        self.changes = Changes(tools=announces, relayed=announces and gateway is not None)
        """Who hears that the catalog changed; ``announces``: the connections stay open (stdio,
        HTTP with sessions), so list changes are told and declared at the handshake."""
        self.searching = ToolSearch(self.catalog, self.exported, self.changes.tell_client) \
            if tool_search else None  # tools/list: the search tool and what a client loaded
        self.state: dict[str, Any] = {}
        """What the server's lifespan yields, the same mapping on every path: the SDK's
        transports enter the lifespan (``lifespan``) and the one-request path in front of
        them hands it to the SDK's kernel (``server/exchange.py``)."""
        self.calling: dict[str, MCPClientLink] = {}
        """The calls in flight, by call id: a call that waits for approval tells its client."""
        self.running: dict[str, anyio.CancelScope] = {}
        """Their cancel scopes: ``stop_calls`` ends them (a server stopping)."""
        # The gateway's upstreams: their resources and prompts beside ours, and what they say
        # or ask during a relayed call passed on to the client that made it.
        self.relayed = RelayedHandlers(gateway.sources, client_of) if gateway else None
        if gateway is not None and isinstance(gateway.relay.hub, ClientSessions):
            gateway.relay.hub.listen(self.changes.relayed)  # their changes to listeners too
        invoker.approvals.hooks.register(HookEvent.APPROVAL_REQUESTED, self.approval_asked)
        self.tasks = Tasks(TaskStore(store_of(invoker)), self)
        """The calls that run as MCP tasks (``tasks.py``), their state in the store."""
        self.server = self._server(name, instructions)

    def _server(self, name: str, instructions: str | None) -> FaceServer:
        with warnings.catch_warnings():  # logging is deprecated in 2026-07-28, current before
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            server = FaceServer(
                self, name, version=_version(), instructions=instructions, lifespan=self.lifespan,
                on_list_tools=self.list_tools, on_call_tool=self.call_tool,
                on_list_prompts=self.list_prompts, on_get_prompt=self.get_prompt,
                on_list_resources=self.list_resources, on_read_resource=self.read_resource,
                on_list_resource_templates=self.list_resource_templates,
                on_subscribe_resource=self.subscribe, on_unsubscribe_resource=self.unsubscribe,
                on_completion=self.complete, on_set_logging_level=self.set_level,
                on_subscriptions_listen=ListenHandler(self.changes.bus),
                get_tool_input_schema=self.exported.input_schema)
        # Middleware (the SDK's way: its Server's list): requestState (an approval asked at the
        # client, a tool's earlier answers) sealed to its client under the shared secret, else
        # one of this process's own; and tasks in their 2025-11-25 form (``legacy_tasks.py``).
        self.tasks.serve_on(server)
        secret = self.state_secret or self.ask_client or secrets.token_hex(32)
        server.middleware += [RequestStateBoundary(state_security(secret, client_of),
                                                   default_audience=name), LegacyTasks(self.tasks)]
        return server

    @asynccontextmanager
    async def lifespan(self, _server: Server[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
        """The server's lifespan: the face's ``state``, kept by the face rather than read
        back from the transport that entered it; the tasks run in it."""
        async with self.tasks.serving():
            yield self.state

    def build(self, name: str | None = None, instructions: str | None = None) -> FaceServer:
        """The face's server (built with the face, by ``MCPFace(..., name=, instructions=)``);
        ``name`` and ``instructions`` are read there. Goes away in 0.3.0: use ``face.server``."""
        return self.server

    def remember(self, ctx: Ctx) -> None:
        """Keep the connection of a request's client: to tell it when the catalog changes,
        and, with a gateway, what its upstreams say to every client."""
        client, session = client_of(ctx), ctx.session
        self.changes.remember(client, session, modern=modern(ctx))
        hub = self.gateway.relay.hub if self.gateway is not None else None
        if isinstance(hub, ClientSessions):
            hub.remember(client, session)

    async def close_sessions(self) -> None:
        """Close the client sessions (as a server stops): each writes its audit summary
        (refused calls counted past ``max_audit_rows``) and unpins its artifacts."""
        sessions, self.sessions = list(self.sessions.values()), {}
        with anyio.CancelScope(shield=True):
            for session in sessions:
                await session.close()

    def release_artifacts(self, older_than_s: float) -> int:
        """Unpin the artifacts the client sessions stored more than ``older_than_s`` seconds
        ago (a session lives as long as its server), for the store's gc; returns how many."""
        return sum(session.release(older_than_s) for session in list(self.sessions.values()))

    def session_for(self, ctx: Ctx) -> InvokerSession:
        if self.fixed_session is not None:
            return self.fixed_session
        caller = caller_of(ctx)
        found = self.sessions.get(caller.client)
        if found is None:
            found = self.sessions[caller.client] = self.invoker.open_session(
                session_id=f"client-{caller.client}", trace_limit=TRACE_LIMIT, caller=caller)
        return found

    def listing(self) -> tuple[list[dict[str, Any]], list[str]]:
        """The declarations in name order and their names (``Exported.listing``)."""
        return self.exported.listing()

    async def approval_asked(self, _event: HookEvent, payload: dict[str, Any]) -> None:
        """A call of this server's waits for a person's decision: a log line to its client."""
        request = payload.get("request") or {}
        link = waiting_call(self.calling, request)
        if link is not None:
            where = self.invoker.approvals.where(str(request.get("id")))
            await quietly(link.log("notice", f"{request.get('tool')}: waiting for approval "
                                             f"(request {request.get('id')}): {where}",
                                   "toolkeeper.approval"))

    async def list_tools(self, ctx: Ctx, params: Any) -> types.ListToolsResult:
        self.remember(ctx)
        if self.gateway is not None:
            await self.gateway.refresh_stale(wait_s=STALE_WAIT_S)  # a slow upstream: its own
        # an export of a large catalog takes a while: off the event loop, where other
        # clients' calls are answered
        declarations, names = await anyio.to_thread.run_sync(self.listing)
        caller = caller_of(ctx) if self.fixed_session is None else self.fixed_session.caller
        if caller.tools is not None:  # an access token's scopes: only the tools they cover
            table = self.exported.current.names
            shown = [i for i, wire in enumerate(names) if caller.may_use(table.name(wire))]
            declarations = [self._as_seen(declarations[i], table.name(names[i]), caller)
                            for i in shown]
            names = [names[i] for i in shown]
        if self.searching is not None:
            declarations, names = self.searching.narrow(caller.client, declarations, names)
        return page_of(declarations, names, getattr(params, "cursor", None), self.page_size)

    def _as_seen(self, declaration: dict[str, Any], name: str, caller: Caller
                 ) -> dict[str, Any]:
        """A declaration as a caller limited to some tools reads it: code mode's lists only
        the tools that caller may call."""
        tool = self.catalog.get(name)
        if isinstance(tool, ToolChainTool):
            return {**declaration, "description": tool.description_for(caller)}
        return declaration

    async def call_tool(self, ctx: Ctx, params: types.CallToolRequestParams) -> Any:
        """``tools/call`` on the wire: the request read into a call and its context, run by
        ``run_call`` (or as a task, ``tasks.py``), and its outcome written back as the
        client's revision expects."""
        self.remember(ctx)
        call = await self.parse_call(params.name, params.arguments or {})
        as_task = await self.tasks.call(ctx, call, params)
        if as_task is not None:
            return as_task
        answers = answers_of(params) if modern(ctx) else {}
        link = self.link(ctx, call, answers)
        if self.channel is not None and modern(ctx):  # the client's answers so far
            await self.channel.answer(params, self.session_for(ctx), link.client)
        outcome = await self.one_pass(ctx, call, link)
        return await self.answer(call, outcome, link, answers)

    def link(self, ctx: Ctx, call: ToolCall, answers: dict[str, Any]) -> MCPClientLink:
        """The way back to the client of ``ctx`` for a pass of ``call``."""
        return MCPClientLink(ctx, client=client_of(ctx), levels=self.levels,
                             audit=self.invoker.audit, call_id=call.id, tool=call.name,
                             session_id=self.session_for(ctx).id, answers=answers)

    async def one_pass(self, ctx: Ctx, call: ToolCall, link: MCPClientLink, *,
                       tasked: bool = False) -> InvocationResult | str | None:
        """One pass of ``call`` through the door for the client of ``ctx``; ``tasked``: the
        call is (or may become) a task, whose client is not asked to approve (once its request
        is answered, ``link.quiet``, no progress or log lines go to it either: progress goes
        back on the request, which the SDK drops when the client gave no token)."""
        session = self.session_for(ctx)

        async def progress(done: float, total: float | None, message: str | None) -> None:
            if not link.quiet:
                await ctx.session.report_progress(done, total, message)
        tool_ctx = ToolContext(
            call_id=call.id, tool_name=call.name, session_id=session.id,
            state=session.state, client=link,  # this request's caller (its token's scopes)
            caller=session.caller if self.fixed_session is not None else caller_of(ctx),
            progress_sink=progress, protocol=ctx.protocol_version, era=era_of(ctx))
        run = partial(self.run_call, call, session, tool_ctx, link=link,
                      asking=self._asker(ctx, link, tasked))
        with calling_client(SdkClientLink(ctx, link.client)):  # the gateway's relay
            if self.pages.shows(ctx):  # 2025-11-25: the link while the call waits
                return await self.pages.beside(ctx, call.id, run)
            return await run()

    def _asker(self, ctx: Ctx, link: MCPClientLink, tasked: bool) -> ClientChannel | None:
        """Who asks a 2026-07-28 call's client: the form, else the link; ``None``: none."""
        if tasked or not modern(ctx):
            return None
        if self.channel is not None:
            return self.channel
        return self.pages.channel if self.pages.links_now(ctx, link.answers) else None

    async def parse_call(self, name: str, arguments: dict[str, Any]) -> ToolCall:
        """The call of the tool the wire names ``name`` (an upstream's is listed first)."""
        exported = self.exported.of(name)
        if self.gateway is not None and name not in exported.names:
            await self.gateway.listed(name)  # an upstream's, named before it is listed
            exported = self.exported.of(name)
        return exported.one_call(call_id(), name, arguments)

    async def run_call(self, call: ToolCall, session: InvokerSession, ctx: ToolContext, *,
                       link: MCPClientLink | None = None, asking: ClientChannel | None = None
                       ) -> InvocationResult | str | None:
        """Run ``call`` through the door, cancellable by ``stop_calls``: its result, the
        request to ask its client about when it needs a person and ``asking`` (the form or
        the link), or ``None`` when the server stopped it."""
        if link is not None:  # a wait for approval is told to its client
            self.calling[call.id] = link
        self.running[call.id] = scope = anyio.CancelScope()
        calling = MCP_CALL.set(call.id)  # a request its script's call makes is its wait too
        try:
            with scope:
                if asking is not None:
                    outcome = await asking.invoke(call, session, ctx)
                else:
                    outcome = await self.invoker.invoke(call, session=session, ctx=ctx)
        finally:
            MCP_CALL.reset(calling)
            self.calling.pop(call.id, None)
            self.running.pop(call.id, None)
        return None if scope.cancelled_caught else outcome

    def _offer_files(self, call: ToolCall, result: InvocationResult) -> None:
        for stored in result.files:
            self.resources.remember(stored.artifact_ref, name=stored.path,
                                    mime_type=stored.media_type, size=stored.size)
        if result.artifact_ref is not None and self.resources.store is not None:
            self.resources.remember(result.artifact_ref, name=f"{call.name} result",
                                    mime_type="text/plain", size=result.artifact_size)

    async def answer(self, call: ToolCall, outcome: InvocationResult | str | None,
                     link: MCPClientLink, answers: dict[str, Any]
                     ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        if outcome is None:  # the server stopped it
            return types.CallToolResult(content=[types.TextContent(text=stopped_text(call.name))],
                                        is_error=True)
        if isinstance(outcome, str):  # the client is asked: with the form, else the link
            return self.channel.ask(outcome) if self.channel else self.pages.ask(outcome)
        if link.unreachable:
            raise MCPError(code=NO_WAY_BACK, message=link.unreachable)
        if link.missing:
            raise MCPError(code=MISSING_CAPABILITY, message=f"tool {call.name!r} needs the "
                           f"client capabilities {sorted(link.missing)}; declare them",
                           data={"requiredCapabilities": link.missing})
        if link.asked:
            return next_round(link.asked, answers)
        if outcome.status == "denied":
            await quietly(link.log("warning", f"{call.name}: {outcome.to_tool_result().text}",
                                   "toolkeeper.approval"))
        return self.rendered(call, outcome)

    def rendered(self, call: ToolCall, outcome: InvocationResult) -> dict[str, Any]:
        """A finished call's MCP result (a dict: the SDK checks it once); its files offered."""
        rendered = render_result(call, outcome.to_tool_result(), "mcp")
        self._offer_files(call, outcome)  # what it stored, as this client's resources
        if outcome.artifact_ref is not None and self.resources.store is not None:
            rendered = {**rendered, "content": [*cast(list[Any], rendered["content"]),
                                                artifact_link(call.name, outcome.artifact_ref,
                                                              outcome.artifact_size)]}
        return {**rendered, "resultType": "complete"}  # as the model's default said

    def stop_calls(self) -> int:
        """Cancel every call in flight (a server stopping, its drain over): each is recorded as
        cancelled and answered with ``stopped_text``. Returns how many."""
        scopes = list(self.running.values())
        for scope in scopes:
            scope.cancel()
        return len(scopes)

    async def serve_stdio(self, *, beside: Sequence[Callable[[], Coroutine[Any, Any, None]]] = (),
                          until: Callable[[], Coroutine[Any, Any, None]] | None = None,
                          drain_s: float = 1.0) -> None:
        """Serve one client on this process's stdin/stdout (``stdio.py``) until it leaves or
        ``until`` returns; the tasks of ``beside`` run alongside."""
        await run_stdio(self.server, self.server.create_initialization_options(), beside=beside,
                        until=until, drain_s=drain_s, stop_calls=self.stop_calls)


def stopped_text(tool: str) -> str:
    """What a call the server cancelled as it stopped answers (after a moment to finish)."""
    return (f"the server stopped before the call of {tool!r} finished: it was cancelled, and "
            "may have partly run. Call it again when the server is back.")


def _version() -> str:
    """toolkeeper's version, as clients see it in ``serverInfo``."""
    try:
        return version("toolkeeper")
    except PackageNotFoundError:
        return "0"


def _face(server: Server[Any]) -> MCPFace:
    if not isinstance(server, FaceServer):
        raise TypeError(f"{server!r} is not a server built by mcp_server or MCPFace")
    return server.face


async def announce_changes(server: Server[Any], catalog: object, poll_s: float = 0.2) -> None:
    """Tell the clients of ``server`` (built by ``mcp_server``) whenever ``catalog`` changes:
    ``notifications/tools/list_changed`` on the 2026-07-28 ``subscriptions/listen`` streams
    and to the 2025-11-25 connections that stay open (``Changes.follow``). Runs until
    cancelled."""
    await _face(server).changes.follow(catalog, poll_s)


async def close_sessions(server: Server[Any]) -> None:
    """Close the client sessions of ``server`` (``MCPFace.close_sessions``)."""
    await _face(server).close_sessions()


def stop_calls(server: Server[Any]) -> int:
    """Cancel the calls in flight of ``server`` (``MCPFace.stop_calls``)."""
    return _face(server).stop_calls()


def release_artifacts(older_than_s: float, server: Server[Any]) -> int:
    """Unpin what the client sessions of ``server`` stored more than ``older_than_s`` seconds
    ago (``MCPFace.release_artifacts``). Returns how many."""
    return _face(server).release_artifacts(older_than_s)


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
    its report). ``alongside`` runs in the same event loop until then. ``on_ready`` is called
    once the server is built, just before it serves. ``options``: ``MCPFace``'s."""
    face = MCPFace(invoker, gateway=gateway, **options)
    beside: list[Callable[[], Coroutine[Any, Any, None]]] = [
        partial(face.changes.follow, invoker.registry)]
    if gateway is not None:
        beside.append(partial(attach_upstreams, gateway, invoker.registry, on_report))
    if alongside is not None:
        beside.append(alongside)
    if on_ready is not None:
        on_ready()

    async def run() -> None:
        async with AsyncExitStack() as stack:
            if gateway is not None:
                await stack.enter_async_context(gateway)
            await face.serve_stdio(beside=beside, until=until, drain_s=drain_s)
        await face.close_sessions()

    anyio.run(run)
