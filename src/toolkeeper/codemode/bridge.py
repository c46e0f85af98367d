"""The host's side of one run's bridge: frames in, checked, through the invoker, frames out.

The script writes JSON frames; each is checked here — the run's secret, the frame's size, the
tool being one the chain may call — and handed to ``ToolInvoker.invoke`` with the run's own
session, which records the call in the trace before the answer goes back. Answers are
``marshal``-encoded plain values (the script side trusts the host). Media a call returned are
listed as ``ChainFile``s under ``media/`` and their bytes written into the run's scratch
directory by the script's side, up to a per-run total.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import marshal
import secrets
import socket
import time
from typing import TYPE_CHECKING, Any

import anyio

from ..core.call import ToolCall
from ..core.json import JsonObject
from ..errors import BudgetExceededError
from ..invoke.audit import AuditEntry
from ..invoke.results import ChainCallRecord, ChainFile, InvocationResult, RecordStatus
from ..invoke.session import InvokerSession
from .prelude import MAX_FRAME
from .signatures import function_names, signature

if TYPE_CHECKING:
    from .chain import ToolChainTool

__all__ = ["MEDIA_RUN_BYTES", "Bridge"]

NAME = "tool_chain"
SEARCH = "search_tools"
"""How a script's searches appear in the trace and the audit log."""
QUERY_CHARS = 1000
NAME_CHARS = 200
STRUCTURED_BYTES = 1 << 20
"""A structured result larger than this (as JSON) is not sent into the sandbox."""
MEDIA_RUN_BYTES = 32 << 20
"""Media bytes a run may have written into its scratch directory (files past it are listed
with their artifact ref only)."""


class Bridge:
    """Serves one run: started with the script and the tools, ended by the script's last frame,
    a broken or forged frame, or the run ending (``stop``)."""

    def __init__(self, chain: ToolChainTool, sock: socket.socket, secret: str,
                 session: InvokerSession, code: str, workspace: str | None = None) -> None:
        self.chain, self.sock, self.secret = chain, sock, secret
        self.session, self.code, self.workspace = session, code, workspace
        self.allowed = {t.name: t for t in chain.callable_tools()  # and the caller's only
                        if session.caller.may_use(t.name)}
        self.functions = function_names(self.allowed)
        session.tools = frozenset(self.allowed)  # never tool_chain itself nor a hosted tool
        self.value: Any = None
        self.done = False
        self.error = ""
        self.files: list[ChainFile] = []
        self._media_bytes = 0
        self._calls = 0
        self._channel = _Channel(sock)
        self._stopped = False

    def stop(self) -> None:
        self._stopped = True
        self._channel.close()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()

    async def serve(self) -> None:
        """Answer the script's frames in the event loop (no thread hop per call)."""
        self.sock.setblocking(False)
        try:
            self._channel.open()
            await self._send({"type": "start", "secret": self.secret, "code": self.code,
                              "workspace": self.workspace,
                              "tools": [{"name": name, "function": function}
                                        for name, function in self.functions.items()]})
            while True:
                frame = await self._receive()
                if frame is None:
                    return
                if not _same_secret(frame.get("secret"), self.secret):
                    self.error = "the bridge received a frame without the run's secret"
                    return
                kind = frame.get("type")
                if kind == "done":
                    self.value, self.done = frame.get("value"), True
                elif kind == "error":
                    self.error = str(frame.get("error", ""))[-4000:]
                elif kind == "call":
                    await self._send(await self._call(frame))
                elif kind == "search":
                    await self._send(await self._search(frame))
                else:
                    self.error = f"the bridge received an unknown frame type {kind!r}"
                    return
                if self.error:  # the run's budget is used up: it ends here
                    return
        except (OSError, ValueError, TypeError, RecursionError) as exc:
            # a frame the host cannot read ends the run; the calls that ran stay in its trace
            if not self._stopped:
                self.error = f"the bridge closed: {exc}"
        finally:
            # whatever ended the bridge (the script finished, broke the protocol or forged a
            # frame), the script's end reads EOF now: it cannot wait on an answer forever
            self.stop()

    async def _call(self, frame: dict[str, object]) -> dict[str, Any]:
        # a tool outside the chain's set is refused by the invoker itself (session.tools):
        # denied, policy_violation, in the trace and the audit log like any call
        name, arguments = str(frame.get("tool", ""))[:NAME_CHARS], frame.get("arguments")
        self._calls += 1  # the host numbers the calls: nothing the script sends names them
        call = ToolCall(id=f"chain-{self._calls}", name=name,
                        arguments=arguments if isinstance(arguments, dict) else {})
        result = await self.chain._invoker.invoke(call, session=self.session)
        if result.error_code == "budget_exceeded" and self._budget_spent():
            self._end_spent()
        return self._shown(result)

    def _budget_spent(self) -> bool:
        return self.session.call_count >= self.session.policy.max_tool_calls

    def _end_spent(self) -> None:
        """A run whose budget is used up ends: a script looping past it would otherwise have
        every refused call recorded, one by one, for as long as it runs."""
        self.error = (f"the script used its whole budget of "
                      f"{self.session.policy.max_tool_calls} tool calls and searches; the run "
                      "ends here (what ran is in the trace)")

    def _shown(self, result: InvocationResult) -> dict[str, Any]:
        """What the script gets back: the text cut to the inline limit with a note, and the
        call's media as files of this run."""
        inline = self.session.policy.max_inline_result_bytes
        text = result.text
        data = text.encode("utf-8", "surrogatepass")
        if inline and len(data) > inline:
            text = data[:inline].decode("utf-8", "ignore") + (
                f"\n[... {len(data) - inline} more bytes not shown]")
        structured = result.structured
        if structured is not None and _too_big(structured, result.artifact_ref is not None):
            structured = None  # big data stays on the host: the script passes the ref on
            text += (f"\n[the structured result is over {STRUCTURED_BYTES} bytes and stays on "
                     "the host" + (f"; pass {{\"$artifact\": \"{result.artifact_ref}\"}} to "
                                   "another tool" if result.artifact_ref else "") + "]")
        return {"status": result.status, "text": text, "structured": structured,
                "artifact_ref": result.artifact_ref, "error_code": result.error_code,
                "files": [self._file(f) for f in result.files]}

    def _file(self, produced: ChainFile) -> JsonObject:
        stem, _, ext = produced.path.rpartition(".")
        stem = stem.rpartition("_")[0] or stem
        taken = {f.path for f in self.files}
        number = 0
        while f"{stem}_{number}.{ext}" in taken:
            number += 1
        item = dataclasses.replace(produced, path=f"{stem}_{number}.{ext}")
        self.files.append(item)
        shown: dict[str, Any] = {"path": item.path, "media_type": item.media_type,
                                 "artifact_ref": item.artifact_ref, "size": item.size}
        store = self.chain._invoker.artifact_store
        if store is not None and self._media_bytes + item.size <= MEDIA_RUN_BYTES:
            with contextlib.suppress(KeyError, OSError):
                shown["data"] = store.resolve(item.artifact_ref).data
                self._media_bytes += item.size
        return shown

    async def _search(self, frame: dict[str, Any]) -> dict[str, Any]:
        """A search of the chain's tools: counted against the run's budget like a call, and
        recorded in its trace and the audit log as a call of ``search_tools``."""
        try:
            limit = max(1, min(int(frame.get("limit", 5)), 20))
        except (TypeError, ValueError):
            limit = 5
        query = str(frame.get("query", ""))[:QUERY_CHARS]
        self._calls += 1
        call_id, arguments = f"chain-{self._calls}", {"query": query, "limit": limit}
        started = time.perf_counter()
        try:
            self.session.reserve(SEARCH, None)
        except BudgetExceededError as exc:
            await self._record(call_id, arguments, "error", exc.code, started)
            if self._budget_spent():
                self._end_spent()
            return {"signatures": [], "error": exc.message}
        hits = await anyio.to_thread.run_sync(
            lambda: self.chain._invoker.registry.search(query, limit=limit))
        await self._record(call_id, arguments, "ok", None, started)
        return {"signatures": [signature(self.allowed[h.name], self.functions[h.name])
                               for h in hits if h.name in self.allowed]}

    async def _record(self, call_id: str, arguments: dict[str, Any], status: RecordStatus,
                      error_code: str | None, started: float) -> None:
        duration = (time.perf_counter() - started) * 1000
        record = ChainCallRecord(tool=SEARCH, call_id=call_id, status=status,
                                 duration_ms=round(duration, 3), error_code=error_code,
                                 arguments=arguments)
        self.session.record(record)
        audit = self.chain._invoker.audit
        if audit is not None:
            await anyio.to_thread.run_sync(audit.record, AuditEntry(
                ts=time.time(), call_id=call_id, session_id=self.session.id, tool=SEARCH,
                args_digest=record.args_digest, arguments=arguments, status=status,
                error_code=error_code, duration_ms=duration))

    async def _send(self, message: dict[str, object]) -> None:
        try:
            data = marshal.dumps(message, 4)
        except ValueError:  # a value marshal does not carry (a tool's odd structured output)
            data = marshal.dumps(json.loads(json.dumps(message, default=repr)), 4)
        view = memoryview(len(data).to_bytes(4, "big") + data)
        while view:
            try:
                view = view[self.sock.send(view):]
            except BlockingIOError:
                await anyio.wait_writable(self.sock)

    async def _receive(self) -> dict[str, Any] | None:
        head = await self._exact(4)
        if head is None:
            return None
        size = int.from_bytes(head, "big")
        if size > MAX_FRAME:
            raise ValueError(f"a frame of {size} bytes is over the {MAX_FRAME}-byte limit")
        body = await self._exact(size)
        if body is None:
            return None
        frame = json.loads(body)
        if not isinstance(frame, dict):
            raise ValueError("a frame must be a JSON object")
        return frame

    async def _exact(self, size: int) -> bytes | None:
        return await self._channel.exact(size)


def _same_secret(sent: object, secret: str) -> bool:
    """Whether a frame carries the run's secret, compared in constant time as bytes (a string
    with characters outside ASCII cannot be compared as a string, and any value may arrive)."""
    if not isinstance(sent, str):
        return False
    return secrets.compare_digest(sent.encode("utf-8", "surrogatepass"), secret.encode())


def _too_big(value: Any, offloaded: bool) -> bool:
    """Whether a structured result is over ``STRUCTURED_BYTES``: measured cheaply (``marshal``
    shares repeated objects, so it can only under-count), and as JSON when the call's text was
    already large enough to be offloaded."""
    try:
        if len(marshal.dumps(value, 4)) > STRUCTURED_BYTES:
            return True
    except ValueError:
        offloaded = True  # not plain data: measure it as JSON
    if not offloaded:
        return False
    try:
        return len(json.dumps(value, default=repr)) > STRUCTURED_BYTES
    except (TypeError, ValueError, RecursionError):
        return True


class _Channel:
    """Buffered reads from the bridge socket. On asyncio the socket stays registered with the
    loop for the whole run (one wake-up per frame, no register/unregister per read: ~20 µs
    less per call here); elsewhere it waits with anyio. Reading pauses while a frame and a
    half is buffered, so a script flooding the socket cannot grow the host's memory."""

    HIGH = 2 * MAX_FRAME

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()
        self.eof = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reading = False
        self._waiter: asyncio.Future[None] | None = None

    def open(self) -> None:
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None  # another anyio backend: wait per read

    def _resume(self) -> None:
        if self._loop is not None and not self._reading and not self.eof:
            self._loop.add_reader(self.sock.fileno(), self._readable)
            self._reading = True

    def _pause(self) -> None:
        if self._loop is not None and self._reading:
            self._reading = False
            with contextlib.suppress(ValueError, OSError, RuntimeError):
                self._loop.remove_reader(self.sock.fileno())

    def _readable(self) -> None:
        try:
            chunk = self.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if chunk:
            self.buffer += chunk
            if len(self.buffer) > self.HIGH:
                self._pause()
        else:
            self.eof = True
            self._pause()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def exact(self, size: int) -> bytes | None:
        buffer = self.buffer
        while len(buffer) < size:
            if self.eof:
                return None
            if self._loop is not None:
                self._resume()
                self._waiter = self._loop.create_future()
                try:
                    await self._waiter
                finally:
                    self._waiter = None
                continue
            try:
                chunk = self.sock.recv(max(65536, size - len(buffer)))
            except BlockingIOError:
                await anyio.wait_readable(self.sock)
                continue
            if not chunk:
                self.eof = True
                return None
            buffer += chunk
        data = bytes(buffer[:size])
        del buffer[:size]
        if len(buffer) <= self.HIGH:
            self._resume()
        return data

    def close(self) -> None:
        self._pause()
