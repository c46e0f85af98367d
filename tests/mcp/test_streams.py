"""The in-memory event store a session-keeping server resumes broken streams from."""

from __future__ import annotations

from typing import Any

from toolkeeper.mcp.streams import MemoryEventStore


async def test_a_stream_resumes_after_its_last_event_and_old_events_are_dropped() -> None:
    store = MemoryEventStore(limit=4)
    first = await store.store_event("a", None)  # a priming event: never replayed
    seen = [await store.store_event(s, {"n": i}) for i, s in enumerate("abab")]
    sent: list[Any] = []

    async def send(event: Any) -> None:
        sent.append((event.event_id, event.message))

    assert await store.replay_events_after(seen[0], send) == "a"
    assert sent == [(seen[2], {"n": 2})]
    assert await store.replay_events_after(first, send) is None  # beyond the last 4
