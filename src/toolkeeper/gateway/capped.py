"""Transports to an upstream reading at most ``max_result_bytes`` of any one message (over
HTTP, of the answer to one request): the SDK's own stdio reader keeps a line however long it
grows, so a server answering 64 MiB had all of it read, parsed and passed on. A message over the
cap ends the connection (what was read of it is dropped at once); the call waiting on it gets
an error naming the cap and how to raise it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
import anyio.abc

from .confine import Launch
from .http11 import LEAN, KeptAlive
from .listing import ToolListCheck
from .untrusted import MAX_STDERR_LINE, stderr_line

__all__ = ["STOP_GRACE_S", "capped_http", "capped_stdio"]

STOP_GRACE_S = 0.5
"""Seconds an upstream has to exit after its stdin is closed, then after SIGTERM, before the
next step: a server that stops does so within two seconds, its upstreams included."""


@asynccontextmanager
async def capped_stdio(launch: Launch, limit: int, over: Callable[[], None],
                       check: ToolListCheck | None = None, *, name: str = "?"
                       ) -> AsyncIterator[tuple[Any, Any]]:
    """Start what ``launch`` says in a session of its own and speak MCP with it over stdio
    (newline-delimited JSON-RPC); ``over()`` is called when it sends a message longer than
    ``limit`` bytes, then the connection ends. ``check`` sees what goes out and checks the
    tool listings coming in. What it writes to stderr reaches ours line by line, each line
    prefixed with its ``name`` and its control characters escaped (``stderr_line``)."""
    check = check or ToolListCheck()
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    try:
        process = await anyio.open_process(launch.argv, env=launch.env, cwd=launch.cwd,
                                           stderr=subprocess.PIPE, start_new_session=True,
                                           pass_fds=launch.pass_fds)
    except BaseException:
        launch.release()
        raise
    reads_in, reads = anyio.create_memory_object_stream[Any](0)
    writes, writes_out = anyio.create_memory_object_stream[Any](0)

    def parse(text: str) -> Any:
        # loaded as plain JSON, then validated as Python data: the SDK's validate_json kept
        # several copies of a large answer at once (an 8 MiB result peaked at +40 MiB)
        try:
            return SessionMessage(types.jsonrpc_message_adapter.validate_python(
                _answerable(json.loads(text)), by_name=False))
        except ValueError as exc:
            return exc

    async def reader() -> None:
        assert process.stdout is not None
        buffer = bytearray()
        async with reads_in:
            try:
                async for chunk in process.stdout:
                    buffer += chunk
                    while (end := buffer.find(b"\n")) >= 0:
                        if end > limit:
                            over()
                            return
                        line, buffer = buffer, buffer[end + 1:]
                        del line[end:]
                        # the bytes let go of before the text is parsed, the text before the
                        # message is passed on: a large answer is held once at a time
                        message = None if line.isspace() or not line else _decoded(line)
                        del line
                        if isinstance(message, str):
                            message = parse(message)
                        if message is not None:
                            await reads_in.send(check.received(message))
                            del message
                    if len(buffer) > limit:
                        over()  # a message still growing past the cap: read no more of it
                        return
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                return

    async def writer() -> None:
        assert process.stdin is not None
        async with writes_out:
            try:
                async for message in writes_out:
                    check.sent(message)
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((data + "\n").encode())
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                await reads_in.aclose()

    async with anyio.create_task_group() as group:
        group.start_soon(reader)
        group.start_soon(writer)
        group.start_soon(_told, process, name)
        try:
            yield reads, writes
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    await _stop(process)
                finally:
                    launch.release()
                for stream in (reads, writes, reads_in, writes_out):
                    await stream.aclose()
            group.cancel_scope.cancel()


async def _told(process: anyio.abc.Process, name: str) -> None:
    """Pass on what the upstream writes to stderr, a line at a time (``stderr_line``); a line
    longer than the cap is shown cut, the rest of it read and dropped."""
    assert process.stderr is not None
    buffer, skipping = bytearray(), False
    cap = MAX_STDERR_LINE * 4  # bytes: four per character at most
    with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        async for chunk in process.stderr:
            buffer += chunk
            while (end := buffer.find(b"\n")) >= 0:
                if not skipping:
                    _say(stderr_line(name, bytes(buffer[:end])))
                del buffer[:end + 1]
                skipping = False
            if len(buffer) > cap:
                if not skipping:
                    _say(stderr_line(name, bytes(buffer[:cap]) + b" [cut]"))
                buffer.clear()
                skipping = True
    if buffer and not skipping:
        _say(stderr_line(name, bytes(buffer)))


def _say(line: str) -> None:
    with suppress(OSError, ValueError):
        sys.stderr.write(line)
        sys.stderr.flush()


def _answerable(data: Any) -> Any:
    """``data``, or for an answer to our request whose ``result`` is not an object (``5``),
    the JSON-RPC error that answers it: its call fails at once, not after its whole timeout
    (the SDK's session drops a message it cannot read)."""
    if isinstance(data, dict) and "result" in data and "method" not in data \
            and not isinstance(data["result"], dict) and isinstance(data.get("id"), int | str):
        from mcp_types import INTERNAL_ERROR

        kind = type(data["result"]).__name__
        return {"jsonrpc": "2.0", "id": data["id"], "error": {"code": INTERNAL_ERROR, "message": (
            f"malformed answer: its result is a JSON {_JSON_KINDS.get(kind, kind)}, "
            "not an object")}}
    return data


_JSON_KINDS = {"int": "number", "float": "number", "str": "string", "list": "array",
               "bool": "boolean", "NoneType": "null"}


def _decoded(line: bytearray) -> str | ValueError:
    """``line`` as text, emptied as it is decoded (a large answer is not held twice)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc
    finally:
        line.clear()
    return text


async def _stop(process: anyio.abc.Process) -> None:
    """Close its stdin and give it ``STOP_GRACE_S`` to exit, then terminate its process group,
    then kill it (what it started goes with it: a sandbox's whole pid namespace); then release
    its pipes."""
    if process.stdin is not None:
        await process.stdin.aclose()
    for signum in (None, signal.SIGTERM, signal.SIGKILL):
        if signum is not None and process.returncode is None:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signum)
        with anyio.move_on_after(STOP_GRACE_S):
            await process.wait()
            break
    await process.aclose()


def capped_http(limit: int, over: Callable[[], None],
                seen: Callable[[Any, Any], None] | None = None) -> Any:
    """An httpx transport whose POST responses (the answers to our requests: a result, a
    page) end with an error past ``limit`` bytes, ``over()`` called first. The standalone GET
    stream of notifications is not capped as a whole. ``seen(request, response)`` hears each
    POST and the head of its answer. A request marked ``LEAN`` in its extensions (the lean
    path's calls) goes over ``KeptAlive``'s connections; every other over httpx's own."""
    import httpx2

    class Capped(httpx2.AsyncByteStream):
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        async def __aiter__(self) -> AsyncIterator[bytes]:
            seen = 0
            async for chunk in self.inner:
                seen += len(chunk)
                if seen > limit:
                    over()
                    raise httpx2.ReadError(f"the answer is over {limit} bytes")
                yield chunk

        async def aclose(self) -> None:
            await self.inner.aclose()

    class Transport(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self.inner = httpx2.AsyncHTTPTransport()
            self.kept = KeptAlive(self.inner)

        async def handle_async_request(self, request: Any) -> Any:
            inner = self.kept if request.extensions.get(LEAN) else self.inner
            response = await inner.handle_async_request(request)
            if request.method == "POST":
                response.stream = Capped(response.stream)
                if seen is not None:
                    seen(request, response)
            return response

        async def aclose(self) -> None:
            await self.kept.aclose()
            await self.inner.aclose()

    return Transport()
