"""The one lifecycle of ``toolkeeper serve``, over HTTP and over stdio alike: start, drain, stop.

- **start**: the upstream servers' gateway entered, the server file written, the start lines
  said, the tasks beside the calls and the listeners started; then the front serves — the HTTP
  app until it is stopped, or the stdio client until it leaves or the stop reaches it;
- **drain** (the first stop signal, ``lifecycle.py``): calls waiting for a person answered
  ``pending`` at once (the request stays stored), every listener told to take no new request,
  the stdio pipe read no further; calls still running ``DRAIN_S`` later cancelled, and answered;
- **stop**: the listeners ended (within ``DRAIN_S``), the tasks cancelled, the client sessions
  closed (their audit summaries), the audit rows flushed, the server file removed, the
  upstreams closed.

What it runs is what ``serve_build.assemble`` made of the settings, sockets already bound: a
process that is handed a bound socket and the settings (a worker among several on one port)
runs the same lifecycle.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack, contextmanager

import anyio
import uvicorn

from ..extras import installed
from .lifecycle import DRAIN_S, Lifecycle
from .serve_build import Listener, Served, assemble
from .serve_listen import (
    flush_audit,
    forget_server,
    print_lines,
    record_server,
    release_waits,
    report_lines,
)
from .serve_settings import ServeSettings

__all__ = ["run", "serve", "settle_heap"]


class _Uvicorn(uvicorn.Server):
    """uvicorn's server of one listener: the signals stay the lifecycle's."""

    def __init__(self, listener: Listener) -> None:
        super().__init__(uvicorn.Config(listener.app, log_level="warning",
                                        lifespan="on" if listener.lifespan else "off",
                                        timeout_graceful_shutdown=listener.grace_s))
        self.sock = listener.sock

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        """None: the lifecycle holds the process's signals from its first line on."""
        yield


Announce = Callable[[list[str]], None]
"""How a worker of ``--workers`` hands its start lines to the supervisor, which says them."""


def run(settings: ServeSettings, life: Lifecycle, announce: Announce | None = None) -> None:
    """Build the server of ``settings`` and serve until it is stopped or its client leaves."""
    anyio.run(serve, assemble(settings, life), life, announce,
              backend_options={"use_uvloop": installed("fast")})


async def serve(served: Served, life: Lifecycle, announce: Announce | None = None) -> None:
    """Start ``served``, serve, and stop as the module says. With ``announce`` (a worker)
    the start lines are handed to it, and the supervisor keeps the server file."""
    servers = [_Uvicorn(listener) for listener in served.listeners]
    stdio = served.settings.flags.stdio
    stdin_done = anyio.Event()  # over stdio: the stop reached the client's pipe
    loop = asyncio.get_running_loop()

    def drain() -> None:  # in the event loop, at the first signal
        served.stopping.set()  # the page's event streams end; a cancelled call is answered
        release_waits(served.invoker)  # a call waiting for a person answers 'pending'
        for server in servers:
            server.should_exit = True
        stdin_done.set()
        loop.call_later(DRAIN_S, served.face.stop_calls)

    life.serving(loop, drain)
    async with AsyncExitStack() as stack:
        if served.gateway is not None:
            await stack.enter_async_context(served.gateway)
            stack.callback(life.at, "closing the upstream MCP servers")
        state = served.settings.state_dir
        if announce is None:
            stack.callback(forget_server, state)
        stack.callback(flush_audit, served.invoker)  # last: every request in flight has ended
        if served.invoker.policies is not None:  # its watcher stopped, its counts written
            stack.callback(served.invoker.policies.close)
        stack.callback(life.at, "writing the audit log")
        if announce is None:
            record_server(state, served.url)
        (announce or (report_lines if stdio else print_lines))(served.lines())
        settle_heap()
        async with anyio.create_task_group() as group:
            for task in served.tasks:
                group.start_soon(task)
            side = servers if stdio else servers[1:]  # the page over stdio; /metrics's port
            ended = [anyio.Event() for _ in side]
            for server, done in zip(side, ended, strict=True):
                group.start_soon(_serve_then_set, server, done)
            if stdio:
                await served.face.serve_stdio(until=stdin_done.wait, drain_s=DRAIN_S)
            else:
                await servers[0].serve(sockets=[servers[0].sock])
            served.stopping.set()
            life.at("stopping the listeners")
            for server in side:
                server.should_exit = True  # stopped with the front, not cut off
            with anyio.move_on_after(DRAIN_S):
                for done in ended:
                    await done.wait()
            group.cancel_scope.cancel()
        life.at("closing the client sessions")
        await served.face.close_sessions()  # their audit summaries, before the flush


def settle_heap() -> None:
    """Once built, the server's objects (the modules, the catalog, the app) are moved out of
    the garbage collector's sight: a full collection then walks only what requests made, not
    everything imported — under load, full collections of the whole heap took 0.25–0.5 s each
    and were the tail of the calls' latency. The youngest generation is collected every
    ``YOUNG_THRESHOLD`` allocations rather than 700: a call allocates a few hundred objects, and
    collecting every other call cost ~5 % of serve's CPU per call (each pause stays well under a
    millisecond)."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)


YOUNG_THRESHOLD = 10_000
"""Allocations (less deallocations) between collections of the youngest generation."""


async def _serve_then_set(server: _Uvicorn, ended: anyio.Event) -> None:
    try:
        await server.serve(sockets=[server.sock])
    finally:
        ended.set()
