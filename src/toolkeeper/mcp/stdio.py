"""Serving one client over stdin/stdout, and stopping when asked.

``run_stdio`` serves until the client closes the pipe or ``until`` returns (a stop signal).
Then the server reads no further message, answers every request it has read (a call waiting
for a person answers ``pending``; one still running after ``drain_s`` is cancelled and
answered so), and only then ends as if the client had closed the pipe — at the end of the pipe
the SDK cancels whatever is still running, unanswered.

The wire is read and written by the event loop, never by a blocked thread: the SDK's own stdio
transport reads stdin with ``readline`` in a worker thread, and a thread blocked in ``read``
cannot be cancelled — a server asked to stop while its client kept the pipe open (a desktop
client does) waited for the client's next line before it could end.

While serving, fd 0 points at the null device and fd 1 at stderr, so a tool or a child process
reads end-of-file and its stray output misses the wire (as the SDK's transport does); both are
restored afterwards.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, contextmanager
from typing import Any, cast

import anyio
import anyio.lowlevel
import anyio.to_thread
from mcp.server.stdio import stdio_server

__all__ = ["StdioWire", "claimed_stdio", "run_stdio"]

_CHUNK = 1 << 16


class StdioWire:
    """The client's pipe pair, as the SDK's transport uses it: ``async for line in wire``
    (the messages read), ``await wire.write(text)`` and ``flush()`` (the messages sent). It
    counts the requests read that have no answer written yet."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd, self.write_fd = read_fd, write_fd
        self._buffer = bytearray()
        self._eof = self._held = False
        self._pollable = True
        self._waiting: anyio.CancelScope | None = None
        self.unanswered: set[object] = set()
        self._answered: anyio.Event | None = None

    def hold(self) -> None:
        """Read no further message (the ones read are answered)."""
        self._held = True

    def close(self) -> None:
        """The end of the client's messages, as if it had closed the pipe."""
        self._eof = True
        if self._waiting is not None:
            self._waiting.cancel()

    async def answered(self) -> None:
        """Until every request read has its answer written."""
        while self.unanswered:
            self._answered = anyio.Event()
            await self._answered.wait()

    def __aiter__(self) -> StdioWire:
        return self

    async def __anext__(self) -> str:
        while (end := self._buffer.find(b"\n")) < 0 or self._held:
            if self._eof:
                if not self._buffer or self._held:
                    raise StopAsyncIteration
                end = len(self._buffer) - 1  # the last message, without its newline
                break
            chunk = await self._read()
            if not chunk:
                self._eof = True
            elif not self._held:
                self._buffer += chunk
        line = bytes(self._buffer[:end + 1])
        del self._buffer[:end + 1]
        self._note(line, read=True)
        return line.decode("utf-8", errors="replace")

    async def _read(self) -> bytes:
        """What the pipe has now (``b""`` at its end, or once closed)."""
        if self._pollable:
            with anyio.CancelScope() as self._waiting:
                try:
                    await anyio.wait_readable(self.read_fd)
                except OSError:  # a regular file or /dev/null: never blocks, read it plainly
                    self._pollable = False
                else:
                    return os.read(self.read_fd, _CHUNK)
            if self._eof:
                return b""
        return await anyio.to_thread.run_sync(os.read, self.read_fd, _CHUNK)

    async def write(self, text: str) -> None:
        data = memoryview(text.encode("utf-8"))
        self._note(bytes(data), read=False)
        while data:
            try:
                data = data[os.write(self.write_fd, data):]
            except BlockingIOError:  # the client reads slower than we write: wait for it
                await anyio.wait_writable(self.write_fd)

    async def flush(self) -> None:
        """Nothing: every write goes to the pipe at once."""

    def _note(self, line: bytes, *, read: bool) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            return
        if not isinstance(message, dict) or "id" not in message:
            return
        ident = json.dumps(message["id"])
        if read and "method" in message:
            self.unanswered.add(ident)
        elif not read and ("result" in message or "error" in message):
            self.unanswered.discard(ident)
            if not self.unanswered and self._answered is not None:
                self._answered.set()


@contextmanager
def claimed_stdio() -> Iterator[StdioWire]:
    """The process's stdin and stdout as a ``StdioWire`` (private duplicates; a pipe or a
    socket written without blocking, never a terminal another process shares); fd 0 points at
    the null device and fd 1 at stderr until the block ends."""
    read_fd = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    write_fd = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    mode = os.fstat(write_fd).st_mode
    piped = stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
    if piped:
        os.set_blocking(write_fd, False)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
    finally:
        os.close(null)
    try:
        yield StdioWire(read_fd, write_fd)
    finally:
        os.dup2(read_fd, 0)
        os.dup2(write_fd, 1)
        if piped:
            os.set_blocking(write_fd, True)
        os.close(read_fd)
        os.close(write_fd)


async def run_stdio(server: Any, options: Any, *,
                    beside: Sequence[Callable[[], Coroutine[Any, Any, None]]],
                    until: Callable[[], Coroutine[Any, Any, None]] | None, drain_s: float,
                    stop_calls: Callable[[], int],
                    context: AbstractAsyncContextManager[Any] | None = None) -> None:
    """Run the low-level MCP ``server`` on this process's stdin/stdout (``context`` entered
    around it, the tasks of ``beside`` alongside) until the client leaves or ``until``
    returns."""

    wires: list[StdioWire] = []
    served = anyio.Event()
    stopping = anyio.Event()

    async def stop_when(scope: anyio.CancelScope) -> None:
        assert until is not None
        await until()
        stopping.set()  # a wire claimed from now on is closed at once
        for wire in wires:
            wire.hold()
            with anyio.move_on_after(drain_s):
                await wire.answered()
            if wire.unanswered and stop_calls():  # still running: cancelled, and answered
                with anyio.move_on_after(drain_s):
                    await wire.answered()
            wire.close()
        with anyio.move_on_after(drain_s):
            await served.wait()
        if not served.is_set():
            scope.cancel()

    async with anyio.create_task_group() as group:
        if until is not None:  # first: it takes the stop signals
            group.start_soon(stop_when, group.cancel_scope)
            await anyio.lowlevel.checkpoint()
        async with AsyncExitStack() as stack:
            if context is not None:
                await stack.enter_async_context(context)
            wires.append(stack.enter_context(claimed_stdio()))
            if stopping.is_set():  # asked to stop before it served: nothing read, nothing owed
                wires[0].close()
            read_stream, write_stream = await stack.enter_async_context(
                stdio_server(stdin=cast(Any, wires[0]), stdout=cast(Any, wires[0])))
            for task in beside:
                group.start_soon(task)
            await server.run(read_stream, write_stream, options)
            served.set()
        group.cancel_scope.cancel()
