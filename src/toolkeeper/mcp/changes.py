"""Telling clients the catalog changed: ``notifications/tools/list_changed`` on the
2026-07-28 ``subscriptions/listen`` streams and to the 2025-11-25 connections that stay open.

One ``Changes`` per MCP face: the face hands it the connections it meets and the SDK's listen
handler reads its bus; nothing is kept for the process as a whole, so two servers in one
process tell only their own clients."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import anyio
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ToolsListChanged

__all__ = ["Announces", "Changes"]


@runtime_checkable
class Announces(Protocol):
    """A catalog that calls its listeners on every change (``Toolbox.subscribe``)."""

    def subscribe(self, listener: Callable[[Any], None]) -> Callable[[], object]: ...


class Changes:
    """Who is told that the catalog changed: the ``subscriptions/listen`` streams (through
    ``bus``, the SDK's in-memory subscription bus) and, for each client on the 2025-11-25 wire,
    the last connection it used (stdio has one; a stateful HTTP session its own).

    ``tools``: the face's connections stay open (stdio, HTTP with sessions), so it tells them
    of the tools' changes; ``relayed``: a gateway's upstreams' resource and prompt changes are
    told too. The 2025-11-25 handshake declares (``listChanged``) exactly these: ``told``."""

    def __init__(self, *, tools: bool = True, relayed: bool = False) -> None:
        self.bus = InMemorySubscriptionBus()
        self._kept: dict[str, Any] = {}
        self.told = NotificationOptions(tools_changed=tools, prompts_changed=relayed,
                                        resources_changed=relayed)

    def remember(self, client: str, session: Any, *, modern: bool) -> None:
        """Keep ``session``'s connection to tell ``client`` of a change (a 2026-07-28 client
        listens with ``subscriptions/listen`` instead)."""
        if not modern:
            self._kept[client] = session

    async def tell(self) -> None:
        """``notifications/tools/list_changed`` to every listener and kept connection."""

        await self.bus.publish(ToolsListChanged())
        for client, session in list(self._kept.items()):
            try:
                await session.send_tool_list_changed()
            except Exception:  # a closed connection: forget it
                self._kept.pop(client, None)

    async def tell_client(self, client: str) -> None:
        """``notifications/tools/list_changed`` for ``client`` alone (the tools it loaded with
        tool search): to its kept connection, and to the listeners (a listen stream names no
        client; another one lists again and finds its list as it was)."""
        await self.bus.publish(ToolsListChanged())
        session = self._kept.get(client)
        if session is not None:
            try:
                await session.send_tool_list_changed()
            except Exception:  # a closed connection: forget it
                self._kept.pop(client, None)

    async def relayed(self, kind: str) -> None:
        """The upstreams' ``resources`` or ``prompts`` changed: told to the listeners (the
        gateway's hub tells the 2025-11-25 connections itself)."""
        await self.bus.publish(ResourcesListChanged() if kind == "resources"
                               else PromptsListChanged())

    async def follow(self, catalog: object, poll_s: float = 0.2) -> None:
        """Tell clients whenever ``catalog`` changes (tools added, removed, enabled or
        disabled). A catalog that announces its changes (a ``Toolbox``: ``subscribe``) is
        heard, not polled; a view is polled every ``poll_s`` for a new version. Runs until
        cancelled."""
        if not isinstance(catalog, Announces):
            await self._poll(catalog, poll_s)
            return
        changed = asyncio.Event()
        loop = asyncio.get_running_loop()

        def heard(_event: object) -> None:  # a change may be made from any thread
            loop.call_soon_threadsafe(changed.set)

        stop = catalog.subscribe(heard)
        try:
            while True:
                await changed.wait()
                changed.clear()
                await self.tell()
        finally:
            stop()

    async def _poll(self, catalog: object, poll_s: float) -> None:
        seen = getattr(catalog, "version", None)
        while True:
            await anyio.sleep(poll_s)
            version = getattr(catalog, "version", None)
            if version != seen:
                seen = version
                await self.tell()
