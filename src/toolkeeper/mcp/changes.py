"""Telling clients the catalog changed: ``notifications/tools/list_changed`` on the
2026-07-28 ``subscriptions/listen`` streams and to the 2025-11-25 connections that stay open."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import anyio

__all__ = ["BUSES", "Announces", "announce_changes", "declare_changes", "remember"]

_SESSIONS: weakref.WeakKeyDictionary[Any, weakref.WeakSet[Any]] = weakref.WeakKeyDictionary()
BUSES: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def remember(server: Any, ctx: Any) -> None:
    """Keep a 2025-11-25 connection (stdio has one) to tell it when the catalog changes
    (2026-07-28 clients listen with ``subscriptions/listen`` instead). The SDK keeps the
    connection behind the request-scoped session."""
    if str(getattr(ctx, "protocol_version", "")) >= "2026":
        return
    connection = getattr(getattr(ctx, "session", None), "_connection", None)
    if connection is not None and hasattr(connection, "send_tool_list_changed"):
        _SESSIONS.setdefault(server, weakref.WeakSet()).add(connection)


def declare_changes(server: Any, *, tools: bool, relayed: bool) -> None:
    """Make ``server``'s 2025-11-25 handshake declare (``listChanged``) the list changes it
    tells: the tools' when its connections stay open (``tools``), the resources' and prompts'
    when a gateway's hub tells its upstreams' (``relayed``) — no more, no less."""
    from mcp.server.lowlevel.server import NotificationOptions

    told = NotificationOptions(tools_changed=tools, prompts_changed=relayed,
                               resources_changed=relayed)
    initial = server.create_initialization_options

    def declared(options: Any = None, *more: Any, **named: Any) -> Any:
        return initial(options or told, *more, **named)

    server.create_initialization_options = declared


async def announce_changes(server: Any, catalog: Any, poll_s: float = 0.2) -> None:
    """Tell clients whenever the catalog changes (tools added, removed, enabled or disabled):
    ``notifications/tools/list_changed`` on the 2026-07-28 ``subscriptions/listen`` streams
    (stdio and HTTP) and to 2025-11-25 connections that stay open (stdio). A catalog that
    announces its changes (a ``Toolbox``: ``subscribe``) is heard, not polled; a view is
    polled every ``poll_s`` for a new version. Runs until cancelled."""
    changed = asyncio.Event()
    stop: Callable[[], object] | None = None
    if isinstance(catalog, Announces):
        loop = asyncio.get_running_loop()

        def heard(_event: object) -> None:  # a change may be made from any thread
            loop.call_soon_threadsafe(changed.set)

        stop = catalog.subscribe(heard)
    try:
        seen = getattr(catalog, "version", None)
        while True:
            if stop is not None:
                await changed.wait()
                changed.clear()
            else:
                await anyio.sleep(poll_s)
                version = getattr(catalog, "version", None)
                if version == seen:
                    continue
                seen = version
            await _tell_changed(server)
    finally:
        if stop is not None:
            stop()


@runtime_checkable
class Announces(Protocol):
    """A catalog that calls its listeners on every change (``Toolbox.subscribe``)."""

    def subscribe(self, listener: Callable[[Any], None]) -> Callable[[], object]: ...


async def _tell_changed(server: Any) -> None:
    from mcp.shared.subscriptions import ToolsListChanged

    bus = BUSES.get(server)
    if bus is not None:
        await bus.publish(ToolsListChanged())
    for session in list(_SESSIONS.get(server, ())):
        try:
            await session.send_tool_list_changed()
        except Exception:  # a closed connection or a revision without it: nothing to tell
            continue
