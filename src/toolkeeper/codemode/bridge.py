"""The host's side of one run's bridge: frames in, checked, through the invoker, frames out.

The script writes JSON frames; each is checked here — the run's secret, the frame's size, the
tool being one the chain may call — and handed to ``ToolInvoker.invoke`` with the run's own
session, which records the call in the trace before the answer goes back. Answers are
``marshal``-encoded plain values (the script side trusts the host). Media a call returned are
listed as ``ChainFile``s under ``media/`` and their bytes written into the run's scratch
directory by the script's side, up to a per-run total.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import marshal
import secrets
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from ..approval.journal import JournalEntry
from ..approval.models import args_digest
from ..approval.service import ApprovalService
from ..approval.store import Settles
from ..core.call import ToolCall
from ..core.json import JsonObject
from ..errors import BudgetExceededError
from ..invoke.audit import AuditEntry
from ..invoke.results import ChainCallRecord, ChainFile, InvocationResult, RecordStatus
from ..invoke.session import InvokerSession
from .channel import Channel
from .journal import RunLog, Stop
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
                 session: InvokerSession, code: str, workspace: str | None = None, *,
                 log: RunLog | None = None, kill: Callable[[], None] = lambda: None) -> None:
        self.chain, self.sock, self.secret = chain, sock, secret
        self.session, self.code, self.workspace = session, code, workspace
        self.log, self._kill = log, kill
        self.ended: Stop | None = None
        """Where the run stopped without answering a call: it paused, or what it paused on
        expired (``None``: it was not stopped so)."""
        self.killed = False
        """The bridge ended the sandbox itself (a run stopped at a call), not its limits."""
        self.notes: list[str] = []
        """Lines the run's output carries after the script's own (why it could not pause)."""
        self._lines = code.count("\n") + 1
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
        self._channel = Channel(sock)
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
                elif kind in ("call", "search"):
                    reply = await (self._call(frame) if kind == "call" else self._search(frame))
                    if reply is None:  # the run stops here (paused, or refused to go on)
                        self.killed = True
                        self._kill()
                        return
                    await self._send(reply)
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

    async def _call(self, frame: dict[str, object]) -> dict[str, Any] | None:
        """The answer to one call frame; ``None`` when the run stops at this call instead."""
        # a tool outside the chain's set is refused by the invoker itself (session.tools):
        # denied, policy_violation, in the trace and the audit log like any call
        name, arguments = str(frame.get("tool", ""))[:NAME_CHARS], frame.get("arguments")
        self._calls += 1  # the host numbers the calls: nothing the script sends names them
        seq, line = self._calls, self._line(frame.get("line"))
        call = ToolCall(id=f"chain-{seq}", name=name,
                        arguments=arguments if isinstance(arguments, dict) else {})
        log = self.log
        # a lone surrogate in the arguments: the door refuses the call and records that
        digest = args_digest(call.arguments, surrogates=True) if log is not None else ""
        if log is not None:
            journaled = await self._journaled(log, call, seq, digest, line)
            if journaled is not None or self.error or self.ended is not None:
                return journaled
            if not log.unresumable and self._may_ask(name):
                await log.before_asking(seq, name, digest, line)
        result = await self.chain._invoker.invoke(call, session=self.session)
        if result.error_code == "budget_exceeded" and self._budget_spent():
            self._end_spent()
        answer = self._answer(result)
        if log is not None:
            entry = JournalEntry(seq=seq, tool=name, args_digest=digest, line=line,
                                 answer=answer)
            if not await self._journal(log, entry, result.approval_id
                                       if result.status == "pending" else None):
                return None
        return self._framed(answer)

    async def _journal(self, log: RunLog, entry: JournalEntry, pending: str | None) -> bool:
        """Record a live call's answer; a call that waits for a person (``pending``: its
        request) pauses the run instead, where the journal can resume it. Whether the run
        goes on."""
        if pending is not None:
            if not log.stored:  # it asked though none was foreseen: keep what came before
                await log.before_asking(entry.seq, entry.tool, entry.args_digest, entry.line)
            if not log.unresumable:
                await log.paused(pending)
                self.ended = Stop(kind="paused", request_id=pending, seq=entry.seq,
                                  tool=entry.tool, line=entry.line)
                return False
            self.notes.append(f"[the run could not pause at call {entry.seq} ('{entry.tool}'): "
                              f"{log.unresumable}; the call answered 'pending' to the script "
                              "instead]")
        await log.answered(entry)
        return True

    async def _journaled(self, log: RunLog, call: ToolCall, seq: int, digest: str,
                         line: int | None) -> dict[str, Any] | None:
        """The answer of call ``seq`` from the journal, counted against the budget and
        recorded in the trace (nothing runs); ``None`` past the journal. A call that is not
        the journaled one ends the run (``error``), and so does the call the journal's run
        paused on when its request expired (``ended``)."""
        step = log.step(seq, call.name, digest)
        if isinstance(step, str):
            self.error = step
            return None
        if step is None:
            if log.at_pause(seq) and log.paused_on is not None and \
                    await self._expired(log.paused_on):
                self.ended = Stop(kind="expired", request_id=log.paused_on, seq=seq,
                                  tool=call.name, line=line)
                await log.unlink()
            return None
        tool = self.allowed.get(call.name)
        try:
            self.session.reserve(call.name, tool.namespace if tool is not None else None)
        except BudgetExceededError:
            return None  # the door refuses it as it would any call past the budget
        answer = step.answer
        self.session.record(ChainCallRecord(
            tool=call.name, call_id=call.id, status=_status(answer.get("status")),
            duration_ms=0.0, error_code=_text_or_none(answer.get("error_code")),
            args_digest=digest, replayed=True))
        return self._framed(answer)

    async def _expired(self, request_id: str) -> bool:
        """Whether the request a paused run waits on expired (one past its time-to-live is
        ended first, as a person's decision would find it)."""
        store = self.chain._invoker.approvals.store
        if store is None:
            return False
        if isinstance(store, Settles):
            await anyio.to_thread.run_sync(store.settle, request_id)
        stored = await anyio.to_thread.run_sync(store.get, request_id)
        return stored is not None and stored.state == "expired"

    def _may_ask(self, name: str) -> bool:
        """Whether a call of ``name`` may ask a person in this run (then the journal is
        stored before it goes to the door). Under the operator's policies any call may: an
        @ask permit can hold a safe tool's call, by its arguments as the door validates them."""
        tool = self.allowed.get(name)
        if tool is None or self.session.granted(name):
            return False
        policies = self.chain._invoker.policies
        return (policies is not None and policies.governs) or \
            ApprovalService.needs_approval(tool, policy=self.session.policy, chain=True)

    def _line(self, sent: object) -> int | None:
        """The line of the script a call was made on, as the script's side reports it (a
        hint for the reviewer's card; ``None`` when it is not a line of the script)."""
        return sent if isinstance(sent, int) and 0 < sent <= self._lines else None

    def _budget_spent(self) -> bool:
        return self.session.call_count >= self.session.policy.max_tool_calls

    def _end_spent(self) -> None:
        """A run whose budget is used up ends: a script looping past it would otherwise have
        every refused call recorded, one by one, for as long as it runs."""
        self.error = (f"the script used its whole budget of "
                      f"{self.session.policy.max_tool_calls} tool calls and searches; the run "
                      "ends here (what ran is in the trace)")

    def _answer(self, result: InvocationResult) -> dict[str, Any]:
        """What the script gets back, as the journal keeps it: the text cut to the inline
        limit with a note, and the call's media listed (their bytes are sent by ``_framed``)."""
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
                "files": [dataclasses.asdict(f) for f in result.files]}

    def _framed(self, answer: dict[str, Any]) -> dict[str, Any]:
        """An answer as it goes to the script: each media file named for this run, with its
        bytes while the run's share lasts."""
        files = answer.get("files")
        return {**answer, "files": [self._file(ChainFile(**f)) for f in files]
                if isinstance(files, list) else []}

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

    async def _search(self, frame: dict[str, Any]) -> dict[str, Any] | None:
        """A search of the chain's tools: counted against the run's budget like a call, and
        recorded in its trace and the audit log as a call of ``search_tools`` (``None``: the
        run stops, its journaled run made a call here)."""
        try:
            limit = max(1, min(int(frame.get("limit", 5)), 20))
        except (TypeError, ValueError):
            limit = 5
        query = str(frame.get("query", ""))[:QUERY_CHARS]
        self._calls += 1
        differs = self.log.search(self._calls) if self.log is not None else None
        if differs is not None:  # the journaled run made a call here: the run stops
            self.error = differs
            return None
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


def _status(value: object) -> RecordStatus:
    """A journaled answer's status as a trace record's."""
    for status in ("ok", "error", "denied", "pending", "timeout", "expired"):
        if value == status:
            return status
    return "error"


def _text_or_none(value: object) -> str | None:
    return None if value is None else str(value)


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
