"""The events of the SSE streams a session-keeping HTTP server sent, kept in memory so a
client whose stream broke can resume it (``Last-Event-ID``): the SDK's ``EventStore``
interface, bounded to the last ``limit`` events."""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.streamable_http import EventMessage

__all__ = ["MemoryEventStore"]


class MemoryEventStore:
    """The last ``limit`` events of every stream (older ones cannot be resumed from)."""

    def __init__(self, limit: int = 10_000) -> None:
        self._events: deque[tuple[str, str, Any]] = deque(maxlen=limit)
        self._ids = itertools.count(1)

    async def store_event(self, stream_id: str, message: Any) -> str:
        event_id = str(next(self._ids))
        self._events.append((stream_id, event_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str,
                                  send_callback: Callable[[Any], Awaitable[None]]
                                  ) -> str | None:
        """Send the events of ``last_event_id``'s stream after it; that stream's id, or None
        when the event is unknown (or too old)."""

        stream = next((s for s, e, _ in self._events if e == last_event_id), None)
        if stream is None:
            return None
        after = int(last_event_id)
        for stream_id, event_id, message in list(self._events):
            if stream_id == stream and int(event_id) > after and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream
