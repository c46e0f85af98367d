"""A client's answer to a server's request, carried to the process that asked.

On the 2025-11-25 wire a tool's ``ctx.elicit`` (``ctx.sample``, ``ctx.list_roots``) is a
request on the stream of the call's own POST; the client answers with a POST of its own, which
a load balancer may send to any replica. The process that asked notes each request it sends on a
session (``WatchedWrites``); an answer reaching a process that did not ask it is posted to the
store (``SessionStore``) and taken from there by the one that did, which polls the store only
while it has a question out (every ``POLL_S``) and hands the answer to its session as if the
client had sent it there."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from mcp_types import JSONRPCRequest

from .session_store import SessionStore

__all__ = ["POLL_S", "AnswerRelay", "WatchedWrites", "is_answer"]

logger = logging.getLogger(__name__)

POLL_S = 0.05
"""How often a process with a question out looks for its answer in the store."""


def is_answer(message: Any) -> bool:
    """Whether a JSON-RPC message is a response (a result or an error), not a request."""
    return isinstance(message, dict) and "id" in message and "method" not in message \
        and ("result" in message or "error" in message)


class AnswerRelay:
    """The requests this process sent on each session and awaits an answer to (``asked``),
    and the loop that brings their answers from the store (``follow``)."""

    def __init__(self, store: SessionStore,
                 deliver: Callable[[str, dict[str, Any]], Awaitable[None]]) -> None:
        self.store, self.deliver = store, deliver
        self.asked: dict[str, set[Any]] = {}
        self.woken = anyio.Event()

    def sent(self, session_id: str, request_id: Any) -> None:
        self.asked.setdefault(session_id, set()).add(request_id)
        self.woken.set()

    def mine(self, session_id: str, message: dict[str, Any]) -> bool:
        """Whether ``message`` answers a request of this process (then no longer awaited)."""
        waiting = self.asked.get(session_id, set())
        if message["id"] not in waiting:
            return False
        waiting.discard(message["id"])
        return True

    def forget(self, session_id: str) -> None:
        self.asked.pop(session_id, None)

    async def pass_on(self, session_id: str, message: dict[str, Any]) -> None:
        """An answer to another process's request: into the store, for it to take."""
        await anyio.to_thread.run_sync(self.store.post, session_id, message["id"], message)

    async def follow(self) -> None:
        """Until cancelled: while a question is out, take its answers from the store."""
        while True:
            if not any(self.asked.values()):
                self.woken = anyio.Event()
                await self.woken.wait()
            for session_id, ids in list(self.asked.items()):
                if ids:
                    await self._bring(session_id, sorted(ids, key=str))
            await anyio.sleep(POLL_S)

    async def _bring(self, session_id: str, ids: list[Any]) -> None:
        try:
            found = await anyio.to_thread.run_sync(self.store.take, session_id, ids)
        except Exception:  # the store is away for a moment: the next poll tries again
            logger.warning("could not read the answers of session %s", session_id[:24],
                           exc_info=True)
            return
        for message in found:
            if self.mine(session_id, message):
                await self.deliver(session_id, message)


class WatchedWrites:
    """A session's write stream that tells ``on_request`` the id of every request the server
    sends its client (what ``AnswerRelay`` then waits an answer to)."""

    def __init__(self, inner: Any, on_request: Callable[[Any], None]) -> None:
        self.inner, self.on_request = inner, on_request

    async def send(self, item: Any) -> None:
        message = getattr(item, "message", None)
        if isinstance(message, JSONRPCRequest):
            self.on_request(message.id)
        await self.inner.send(item)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> WatchedWrites:
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> bool | None:
        return await self.inner.__aexit__(*exc)  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
