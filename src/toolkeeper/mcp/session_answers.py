"""A client's answer to a server's request, carried to the process that asked.

On the 2025-11-25 wire a tool's ``ctx.elicit`` (``ctx.sample``, ``ctx.list_roots``) is a
request on the stream of the call's own POST; the client answers with a POST of its own, which
a load balancer may send to any replica. The process that asked notes each request it sends on a
session (``WatchedWrites``); an answer reaching a process that did not ask it is posted to the
store (``SessionStore``) and taken from there by the one that did, which polls the store only
while it has a question out (every ``POLL_S``) and hands the answer to its session as if the
client had sent it there.

A client's ``notifications/cancelled`` for a request running on another process goes the same
way: posted under the cancelled request's id, taken by the process running it (which polls while
it runs a request of a session) and handed to its session, which cancels the call.

The ids of the requests a process sends are its own (``RequestIds``): two processes asking one
session's client at once never send the same id, so each answer reaches the one that asked."""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp_types import JSONRPCRequest

from .session_store import SessionStore

__all__ = ["ID_SPAN", "POLL_S", "AnswerRelay", "NumberedDispatcher", "RequestIds", "WatchedWrites",
           "cancelled_id", "is_answer", "request_id"]

logger = logging.getLogger(__name__)

POLL_S = 0.05
"""How often a process with a question out looks for its answer in the store."""


ID_SPAN = 1 << 32
"""The request ids one process has: a block of its own, reused from its start once spent."""


class RequestIds:
    """The ids of the requests one process sends its sessions' clients: the block of
    ``ID_SPAN`` numbered by ``process`` (its number from the store), so no two processes on one
    store send the same id. Kept below 2**53: integers every JSON parser holds exactly."""

    def __init__(self, process: int) -> None:
        self.base = (process % (1 << 20) + 1) * ID_SPAN
        self.counter = itertools.count(1)

    def next(self) -> int:
        return self.base + next(self.counter) % ID_SPAN


class NumberedDispatcher(JSONRPCDispatcher[Any]):
    """The SDK's dispatcher for one session, its outgoing requests numbered by ``ids`` (the
    SDK numbers each connection's from 1, and a session resumed on two processes is two
    connections)."""

    def __init__(self, *args: Any, ids: RequestIds, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ids = ids

    def _allocate_id(self) -> int:
        return self.ids.next()


def is_answer(message: Any) -> bool:
    """Whether a JSON-RPC message is a response (a result or an error), not a request."""
    return isinstance(message, dict) and "id" in message and "method" not in message \
        and ("result" in message or "error" in message)


def request_id(message: Any) -> Any:
    """The id of a JSON-RPC request (``None`` for anything else)."""
    if isinstance(message, dict) and "method" in message and "id" in message:
        return message["id"]
    return None


def cancelled_id(message: Any) -> Any:
    """The request a ``notifications/cancelled`` names (``None`` for anything else)."""
    if not isinstance(message, dict) or message.get("method") != "notifications/cancelled":
        return None
    params = message.get("params")
    return params.get("requestId") if isinstance(params, dict) else None


def _cancel_key(request_id: Any) -> list[Any]:
    """The store key of a cancellation (a list: never a JSON-RPC id, so never an answer's)."""
    return ["cancelled", request_id]


class AnswerRelay:
    """The requests this process sent on each session and awaits an answer to (``asked``),
    and the loop that brings their answers from the store (``follow``)."""

    def __init__(self, store: SessionStore,
                 deliver: Callable[[str, dict[str, Any]], Awaitable[None]]) -> None:
        self.store, self.deliver = store, deliver
        self.asked: dict[str, set[Any]] = {}
        self.running: dict[str, set[Any]] = {}
        """The client's requests each session runs here (cancellable from another process)."""
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

    def started(self, session_id: str, request_id: Any) -> None:
        self.running.setdefault(session_id, set()).add(json.dumps(request_id))
        self.woken.set()

    def finished(self, session_id: str, request_id: Any) -> None:
        self.running.get(session_id, set()).discard(json.dumps(request_id))

    def runs(self, session_id: str, request_id: Any) -> bool:
        return json.dumps(request_id) in self.running.get(session_id, set())

    def forget(self, session_id: str) -> None:
        self.asked.pop(session_id, None)
        self.running.pop(session_id, None)

    async def pass_cancel(self, session_id: str, message: dict[str, Any]) -> None:
        """A cancellation of a request another process runs: into the store, for it to take."""
        await anyio.to_thread.run_sync(self.store.post, session_id,
                                       _cancel_key(cancelled_id(message)), message)

    async def pass_on(self, session_id: str, message: dict[str, Any]) -> None:
        """An answer to another process's request: into the store, for it to take."""
        await anyio.to_thread.run_sync(self.store.post, session_id, message["id"], message)

    async def follow(self) -> None:
        """Until cancelled: while a question is out, take its answers from the store."""
        while True:
            if not any(self.asked.values()) and not any(self.running.values()):
                self.woken = anyio.Event()
                await self.woken.wait()
            for session_id in list({*self.asked, *self.running}):
                asked = sorted(self.asked.get(session_id, set()), key=str)
                running = [_cancel_key(json.loads(r)) for r in self.running.get(session_id, ())]
                if asked or running:
                    await self._bring(session_id, asked + running)
            await anyio.sleep(POLL_S)

    async def _bring(self, session_id: str, ids: list[Any]) -> None:
        try:
            found = await anyio.to_thread.run_sync(self.store.take, session_id, ids)
        except Exception:  # the store is away for a moment: the next poll tries again
            logger.warning("could not read the answers of session %s", session_id[:24],
                           exc_info=True)
            return
        for message in found:
            if self._awaited(session_id, message):
                await self.deliver(session_id, message)

    def _awaited(self, session_id: str, message: dict[str, Any]) -> bool:
        """Whether ``message`` cancels a request running here or answers one asked here."""
        cancelled = cancelled_id(message)
        if cancelled is not None:
            return self.runs(session_id, cancelled)
        return is_answer(message) and self.mine(session_id, message)


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
