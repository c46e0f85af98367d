"""The gateway: tools of other MCP servers as namespaced tools of a Toolbox, so every call to
them passes the same door (budget, validation, approval, timeouts, audit) as a local tool.

What an upstream says about its tools is untrusted: its annotations are hints, so a tool is at
least ``sensitive`` and one that says it may destroy is ``high`` unless the config sets its
risk; and each tool's fingerprint is pinned the first time it is trusted, so a tool whose
description or schema changes later is disabled until an operator trusts it again
(``toolkeeper tools trust NAME``) — the model never reads the swapped description.

Beyond tools, an upstream's resources and prompts are served through ``gateway.sources``
(``sources.py``: namespaced, and pinned like tools), and what it says or asks during a relayed
call — progress, log lines, sampling and elicitation requests — goes to the client that made the
call (``relay.py``; sampling and elicitation only when its config allows, audited). Its
list-changed notifications make the gateway list it again (one listing at a time per server) and
tell our clients.

Usage::

    async with MCPGateway(config.mcp.servers, pins=SqlitePins("state.db")) as gateway:
        report = await gateway.attach(toolbox)   # lists each server (bounded), adds its tools
        ...                                      # serve or run the agent; calls reconnect
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ..config.model import MCPServerConfig
from ..core.risk import ToolRisk
from ..errors import ToolkeeperError, UsageError
from ..invoke.audit import AuditLog
from ..toolbox.catalog import CatalogBase
from ..toolbox.toolbox import Toolbox
from ..tools.naming import qualify
from ..tools.tool import Tool
from .confine import confinement
from .credentials import UpstreamCredentials
from .names import shadowing, wire_clashes
from .pins import SqlitePins, fingerprint
from .relay import ClientHub, Relay
from .remote import RemoteTool
from .sources import UpstreamSources
from .upstream import Upstream, UpstreamError

__all__ = ["MAX_DECLARATION_BYTES", "STALE_WAIT_S", "MCPGateway", "attach_upstreams", "remote_risk"]

MAX_DECLARATION_BYTES = 64 * 1024
"""The most JSON one upstream tool's declaration may take (name, title, description, schemas,
annotations): a tool past it is not served. A declaration goes out in every ``tools/list`` and
to the model with every request; one of 2 MB broke ``tools/list`` for the SDK's client (its
cap on one event is 1 MiB, for the whole listing) and costs every listing its size. 64 KiB is
many times what a usable declaration takes, and sixteen such tools still fit in that cap."""
DECLARED = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")

STALE_WAIT_S = 2.0
"""How long a client's ``tools/list`` waits for the stale upstreams it lists again (their
listings go on in the background; what they change later is announced)."""


def remote_risk(config: MCPServerConfig, remote: str, annotations: dict[str, Any] | None
                ) -> ToolRisk:
    """The risk of a remote tool: the config's (per tool, then per server), else from its
    annotations taken as untrusted hints — never below ``sensitive``, ``high`` when it may
    destroy (the protocol's default for a tool that does not say it only reads)."""
    if remote in config.tools:
        return config.tools[remote]
    if config.risk is not None:
        return config.risk
    hints = annotations or {}
    if hints.get("readOnlyHint") is True:
        return ToolRisk.SENSITIVE
    if hints.get("destructiveHint") is True:
        return ToolRisk.HIGH
    return ToolRisk.SENSITIVE


class MCPGateway:
    """Upstream MCP servers whose tools are added to a Toolbox and kept in step with them."""

    def __init__(self, servers: Sequence[MCPServerConfig], *, pins: SqlitePins | None = None,
                 refresh_s: float = 30.0, audit: AuditLog | None = None,
                 hub: ClientHub | None = None,
                 credentials: UpstreamCredentials | None = None,
                 on_listed: Callable[[str], None] | None = None) -> None:
        self.servers = list(servers)
        self.on_listed = on_listed
        """Told each server's name as a listing of its tools ends (its tools joined or not)."""
        self.credentials = credentials
        """Where the OAuth tokens of upstreams with ``oauth`` are kept, sealed."""
        self.refresh_s = refresh_s
        self.pins = pins
        self.report: list[str] = []
        """One line per notable event (a server unreachable, a tool disabled), for operators."""
        self.relay = Relay(audit=audit, hub=hub)
        """Where an upstream's log lines and requests go (``relay.hub``: every client)."""
        self._group: TaskGroup | None = None
        self._upstreams: dict[str, Upstream] = {}
        self.sources = UpstreamSources(self._upstreams, pins=pins, note=self._note)
        """The upstreams' resources and prompts (``ResourceSource``, ``PromptSource``,
        ``CompletionSource``) for our MCP server to serve."""
        self._toolbox: Toolbox | None = None
        self._served: dict[str, tuple[str, str]] = {}
        self._listed_at: dict[str, float] = {}
        self._listing: dict[str, anyio.Event] = {}
        """Servers whose tools are being listed now → set when that listing ends (a stale
        refresh does not wait for them; a call naming one of their tools does)."""
        self._relisting: dict[tuple[str, str], bool] = {}
        """(server, list) being listed again → whether to list it once more after."""

    async def __aenter__(self) -> MCPGateway:
        self._group = await anyio.create_task_group().__aenter__()
        self._upstreams.update({s.name: Upstream(s, self._group, self,
                                                 credentials=self.credentials)
                                for s in self.servers})
        if self.pins is not None:  # for ``toolkeeper tools pins``
            for server in self.servers:
                self.pins.runs(server.name, confinement(server))
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self._group is not None
        for upstream in self._upstreams.values():
            await upstream.close()
        self._group.cancel_scope.cancel()
        await self._group.__aexit__(*exc)
        self._group = None

    def upstream(self, name: str) -> Upstream:
        return self._upstreams[name]

    def serves(self, tool: str) -> bool:
        """Whether ``tool`` is one of the upstreams' tools in the toolbox."""
        return tool in self._served

    async def listed(self, tool: str) -> None:
        """Wait for the listing in flight of the upstream whose namespace ``tool`` names, if
        any (a call made while its tools are being listed, at start: bounded by the listing's
        own ``list_timeout_s``); at once for any other name."""
        server = tool.split("-", 1)[0] if "-" in tool else None
        event = self._listing.get(server) if server is not None else None
        if event is not None:
            await event.wait()

    async def attach(self, toolbox: CatalogBase) -> list[str]:
        """Add every server's tools to ``toolbox`` (servers listed concurrently, each bounded
        by its connect and call timeouts). A server that cannot be reached keeps the tools it
        had pinned, which answer with the reason until it comes back. Returns the report."""
        if self._group is None:
            raise UsageError("use the gateway inside 'async with MCPGateway(...)'")
        if not isinstance(toolbox, Toolbox):
            raise UsageError(f"attach() adds tools, so it needs a Toolbox, not {toolbox!r}")
        self._toolbox = toolbox
        for name in self._upstreams:  # in flight from now on (see ``listed``)
            self._listing.setdefault(name, anyio.Event())
        async with anyio.create_task_group() as group:
            for name in self._upstreams:
                group.start_soon(self.refresh, name)
                group.start_soon(self.sources.refresh, name)
        for upstream in self._upstreams.values():
            for line in upstream.cut.values():  # its resources and prompts, cut too
                self._note(line)
        return self.report

    async def asked(self, config: MCPServerConfig, method: str, params: Any) -> Any:
        """An upstream's sampling or elicitation request (see ``Relay.ask``)."""
        return await self.relay.ask(config, "sampling" if method == "sampling"
                                    else "elicitation", params)

    async def notified(self, config: MCPServerConfig, notification: Any) -> None:
        """An upstream's notification: a log line relayed, a list change listed again (in
        the background: never on the connection's own receive path), an update told."""
        import mcp_types as types

        name = config.name
        if isinstance(notification, types.LoggingMessageNotification):
            if config.logs:
                await self.relay.log(name, notification.params)
        elif isinstance(notification, types.ResourceUpdatedNotification):
            await self.sources.updated(name, notification.params.uri)
        elif isinstance(notification, types.ToolListChangedNotification):
            self._relist(name, "tools")
        elif isinstance(notification, types.ResourceListChangedNotification):
            self._relist(name, "resources")
        elif isinstance(notification, types.PromptListChangedNotification):
            self._relist(name, "prompts")

    async def reconnected(self, config: MCPServerConfig) -> None:
        """A broken connection was replaced: subscribe again and list everything again."""
        await self.sources.resubscribe(config.name)
        for what in ("tools", "resources", "prompts"):
            self._relist(config.name, what)

    def _relist(self, server: str, what: str) -> None:
        """List ``what`` of ``server`` again: one listing at a time, and one more after it
        when more notifications came meanwhile (a chatty upstream costs two listings)."""
        key = (server, what)
        if key in self._relisting:
            self._relisting[key] = True
        elif self._group is not None:
            self._group.start_soon(self._relist_now, key)

    async def _relist_now(self, key: tuple[str, str]) -> None:
        if key in self._relisting:
            self._relisting[key] = True  # a listing is running: it runs once more
            return
        server, what = key
        try:
            while True:
                self._relisting[key] = False
                if what == "tools":
                    if self._toolbox is not None:
                        await self.refresh(server)  # the catalog announces its own change
                elif await self.sources.refresh(server, what):
                    hub = self.relay.hub
                    await (hub.resources_changed() if what == "resources"
                           else hub.prompts_changed())
                if not self._relisting[key]:
                    return
        finally:
            del self._relisting[key]

    async def refresh_stale(self, max_age_s: float | None = None, *,
                            wait_s: float | None = None) -> None:
        """Refresh every server last listed more than ``max_age_s`` (``refresh_s``) ago: a
        tool (prompt, template) trusted with ``toolkeeper tools trust`` meanwhile comes back, a
        removed one goes, a swapped one is disabled (held) — also for an upstream that never
        says its lists changed. With ``wait_s``, the listings run in the gateway's background
        and this returns after at most ``wait_s``: a slow upstream holds only its own refresh
        (what it changes later is announced as the catalog's change). A server whose listing
        is in flight is not listed again."""
        if self._toolbox is None or self._group is None:  # attach() has not begun
            return
        max_age_s = self.refresh_s if max_age_s is None else max_age_s
        now = anyio.current_time()
        stale = [n for n in self._upstreams if n not in self._listing
                 and now - self._listed_at.get(n, -math.inf) > max_age_s]
        if not stale:
            return
        for name in stale:  # in flight from now on: a concurrent caller does not list it too
            self._listing.setdefault(name, anyio.Event())
        done = anyio.Event()
        if wait_s is None:
            await self._refresh_all(stale, done)
            return
        self._group.start_soon(self._refresh_all, stale, done)
        with anyio.move_on_after(wait_s):
            await done.wait()

    async def _refresh_all(self, names: list[str], done: anyio.Event) -> None:
        try:
            async with anyio.create_task_group() as group:
                for name in names:
                    group.start_soon(self.refresh, name)
                    group.start_soon(self._relist_now, (name, "resources"))
                    group.start_soon(self._relist_now, (name, "prompts"))
        finally:
            done.set()

    async def refresh(self, server: str) -> None:
        """List ``server`` again and bring its tools in the toolbox up to date."""
        toolbox, upstream = self._toolbox, self._upstreams[server]
        assert toolbox is not None, "attach() first"
        self._listed_at[server] = anyio.current_time()
        self._listing.setdefault(server, anyio.Event())
        try:
            listed = [t.model_dump(by_alias=True, exclude_none=True)
                      for t in await upstream.list_tools()]
            if "tools" in upstream.cut:
                self._note(upstream.cut["tools"])
            for remote, why in upstream.check.refused.items():
                self._note(f"mcp tool '{qualify(server, remote)}' is not served: its "
                           f"declaration is not valid MCP ({why})")
        except (UpstreamError, ToolkeeperError) as exc:
            self._note(str(exc))
            listed = [p.declaration for p in self.pins.all(server)
                      if p.declaration is not None] if self.pins else []
        finally:
            done = self._listing.pop(server, None)
            if done is not None:
                done.set()
            self._listed_at[server] = anyio.current_time()
        wanted: dict[str, tuple[Tool, str | None, str]] = {}
        for declaration in listed:
            made = self._tool(upstream, declaration)
            if made is not None:
                wanted[made[0].name] = made
        ours = {n for n, (srv, _) in self._served.items() if srv == server}
        held = shadowing(wanted, [n for n in wanted if n in toolbox and n not in ours])
        for name, reason in held.items():  # a local tool stays: the upstream's is refused
            del wanted[name]
            self._note(f"mcp tool '{name}' is not served: {reason}")
        clashes = wire_clashes(wanted, [n for n in toolbox.names() if n not in ours])
        held.update(clashes)
        for name, reason in clashes.items():
            tool, _, print_ = wanted[name]
            wanted[name] = (tool, reason, f"{print_}:{reason}")
            self._note(f"mcp tool '{name}' is disabled: {reason}")
        if self.pins is not None:
            self.pins.hold(server, held)
        for name in [n for n, (srv, _) in self._served.items() if srv == server]:
            if name not in wanted:
                del self._served[name]
                toolbox.remove(name)
        for name, (tool, disabled, print_) in wanted.items():
            if self._served.get(name) == (server, print_) and name in toolbox:
                continue  # unchanged: no change event, no re-export
            self._served[name] = (server, print_)
            if name in toolbox:
                toolbox.remove(name)
            toolbox.add(tool)
            if disabled:
                toolbox.disable(name, disabled)
        if self.on_listed is not None:  # its tools are in the toolbox now
            self.on_listed(server)

    def _tool(self, upstream: Upstream, declaration: dict[str, Any]
              ) -> tuple[Tool, str | None, str] | None:
        """The tool for a remote declaration, why it is disabled (or None), and a print of
        both (to skip a refresh that changes nothing)."""
        config, remote = upstream.config, str(declaration.get("name", ""))
        name = qualify(config.name, remote)
        size = declared_size(declaration)
        if size > MAX_DECLARATION_BYTES:
            self._note(f"mcp tool '{name}' is not served: its declaration takes {size} bytes "
                       f"of JSON (name, description, schemas, annotations), over the bound of "
                       f"{MAX_DECLARATION_BYTES} bytes on one tool")
            return None
        disabled = None
        if self.pins is not None:
            pin = self.pins.see(name, config.name, declaration,
                                trust=config.trust == "first-use")
            if pin.state == "changed":
                disabled = (f"changed upstream since it was trusted; review it, then "
                            f"toolkeeper tools trust {name}")
                declaration = pin.declaration or declaration  # never show the new text
            elif pin.state == "untrusted":
                disabled = f"not trusted yet; review it, then toolkeeper tools trust {name}"
            if disabled:
                self._note(f"mcp tool '{name}' is disabled: {disabled}")
        try:
            tool = RemoteTool(upstream, self.relay, name=name, remote=remote,
                              declaration=declaration,
                              risk=remote_risk(upstream.config, remote,
                                               declaration.get("annotations")))
        except ToolkeeperError as exc:
            self._note(f"mcp tool '{name}' is not served: {exc}")
            return None
        return tool, disabled, f"{fingerprint(declaration)}:{disabled}"

    def _note(self, line: str) -> None:
        if line not in self.report:
            self.report.append(line)


def declared_size(declaration: dict[str, Any]) -> int:
    """Bytes of compact JSON one tool's declaration takes (what ``DECLARED`` names of it)."""
    shown = {k: declaration[k] for k in DECLARED if k in declaration}
    return len(json.dumps(shown, separators=(",", ":"), ensure_ascii=False,
                          default=str).encode("utf-8", "surrogatepass"))


async def attach_upstreams(gateway: MCPGateway, toolbox: CatalogBase,
                           on_report: Callable[[list[str]], None] | None = None) -> None:
    """``gateway.attach(toolbox)`` for a server that already serves its local tools: each
    upstream's tools join the toolbox when its own listing ends (the toolbox announces the
    change, which a server sends as ``notifications/tools/list_changed``), so a slow or endless
    listing holds only that upstream's tools. ``on_report`` gets a line as the listing starts,
    then the report and a line when every upstream has been listed."""
    names = ", ".join(f"'{s.name}'" for s in gateway.servers)
    say = on_report or (lambda _lines: None)
    say([f"listing the tools of MCP server(s) {names}; local tools are served meanwhile, "
         "theirs as each listing ends",
         *[f"MCP server '{s.name}' runs {confinement(s)}" for s in gateway.servers]])
    report = await gateway.attach(toolbox)
    hub = gateway.relay.hub  # their resources and prompts are new too
    await hub.resources_changed()
    await hub.prompts_changed()
    say([*report, f"MCP server(s) {names} listed: "
                  f"{sum(1 for n in toolbox.names() if gateway.serves(n))} tool(s) served"])
