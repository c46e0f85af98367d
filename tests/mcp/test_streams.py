"""The events of a session's streams kept in a real SQLite store: a request's stream is
replayed after the client's last event and followed while another writer (another process, in
serve) is still storing its events, up to its result — or, when that process is no longer
alive, up to an error saying so; each session sees its own streams only."""

from __future__ import annotations

from pathlib import Path

import anyio
import mcp_types as types
from mcp.server.streamable_http import GET_STREAM_KEY, EventMessage

from toolkeeper.mcp.session_store import SessionStore
from toolkeeper.mcp.streams import SessionEvents, StoredEvents


def _alive(_process: int) -> bool:
    """Every process is alive."""
    return True


def _progress(n: int) -> types.JSONRPCNotification:
    return types.JSONRPCNotification(jsonrpc="2.0", method="notifications/progress",
                                     params={"progressToken": 7, "progress": n})


def _result(text: str) -> types.JSONRPCResponse:
    return types.JSONRPCResponse(jsonrpc="2.0", id=7, result={"content": [
        {"type": "text", "text": text}]})


async def test_a_resumed_stream_gets_every_later_event_once_up_to_the_result(
        tmp_path: Path) -> None:
    stored = StoredEvents(tmp_path / "store.db", alive=_alive)
    writer, reader = SessionEvents(stored, "s1"), SessionEvents(stored, "s1")
    priming = await writer.store_event("7", None)
    seen = await writer.store_event("7", _progress(1))
    sent: list[EventMessage] = []

    async def send(event: EventMessage) -> None:
        sent.append(event)

    async def call_goes_on() -> None:
        while not sent:  # the client has the second event before the call goes on
            await anyio.sleep(0.01)
        await writer.store_event("7", _progress(3))
        await writer.store_event("7", _result("done"))
        await writer.store_event("7", _progress(99))  # after the result: never sent

    await writer.store_event("7", _progress(2))
    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(call_goes_on)
            assert await reader.replay_events_after(seen, send) is None  # nothing left to tail
    messages = [e.message.model_dump(by_alias=True, exclude_unset=True) for e in sent]
    assert [m.get("params", {}).get("progress") for m in messages] == [2, 3, None], messages
    assert messages[-1]["result"]["content"][0]["text"] == "done"
    assert len({e.event_id for e in sent}) == 3 and priming not in {e.event_id for e in sent}


async def test_a_session_resumes_its_own_streams_only_and_its_get_stream_is_tailed(
        tmp_path: Path) -> None:
    stored = StoredEvents(tmp_path / "store.db", alive=_alive)
    mine, theirs = SessionEvents(stored, "mine"), SessionEvents(stored, "theirs")
    their_event = await theirs.store_event("1", _progress(1))
    await theirs.store_event("1", _result("theirs"))
    first = await mine.store_event(GET_STREAM_KEY, _progress(1))
    await mine.store_event(GET_STREAM_KEY, _progress(2))
    sent: list[EventMessage] = []

    async def send(event: EventMessage) -> None:
        sent.append(event)

    assert await mine.replay_events_after(their_event, send) is None  # another session's id
    for nonsense in ("nonsense", "9" * 5000, "\u0663", "-1"):
        assert await mine.replay_events_after(nonsense, send) is None
    assert sent == []
    assert await mine.replay_events_after(first, send) == GET_STREAM_KEY
    assert [e.message.model_dump()["params"]["progress"] for e in sent] == [2]


async def test_events_older_than_the_kept_time_are_dropped(tmp_path: Path) -> None:
    stored = StoredEvents(tmp_path / "store.db", alive=_alive, keep_s=0.0)
    events = SessionEvents(stored, "s")
    old = await events.store_event("1", _progress(1))
    stored._pruned = 0.0  # the next event prunes, as one does every half minute
    await events.store_event("1", _progress(2))
    assert stored.stream_of(events.session, int(old)) is None


async def test_a_stream_whose_process_was_lost_ends_with_an_error_saying_so(
        tmp_path: Path) -> None:
    sessions = SessionStore(tmp_path / "store.db")
    stored = StoredEvents(tmp_path / "store.db", alive=sessions.alive)
    stored.process = sessions.process_number()
    events = SessionEvents(stored, "s")
    first = await events.store_event("4", _progress(1))
    assert sessions.alive(stored.process) and not sessions.alive(stored.process + 1)
    stored.process = 0  # the next events are a process's the store never numbered: lost
    last = await events.store_event("5", _progress(1))
    sent: list[EventMessage] = []

    async def send(event: EventMessage) -> None:
        sent.append(event)

    with anyio.fail_after(30):
        assert await events.replay_events_after(last, send) is None
    assert len(sent) == 1 and isinstance(sent[0].message, types.JSONRPCError), sent
    assert sent[0].message.id == 5 and "stopped before the call finished" in \
        sent[0].message.error.message
    assert first != last
