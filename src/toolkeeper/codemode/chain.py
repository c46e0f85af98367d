"""Code mode: the model writes a Python script that calls tools; it runs in an OS sandbox and
every call crosses back through the same door.

``ToolChainTool(invoker)`` is a tool named ``tool_chain`` with one parameter, ``code``. Each run
starts a fresh ``python3`` inside the sandbox (bubblewrap: no network, no host files beyond the
read-only system, a private ``/tmp`` and an empty private workspace, a cleared environment,
rlimits), with one end of a socket pair as its only way out. The script's side of the bridge
(``prelude.py``) turns each tool call into a frame; the host, in its event loop, checks it (the
run's secret, the frame size, the tool being allowed) and passes it to ``ToolInvoker.invoke``
with the run's own session (budget, timeouts, approval, guardrails, audit), which records it
in the trace before the answer goes back. The host kills the whole sandbox at the total time limit; whatever
happened, the result lists every call that ran.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread

from ..core.call import ToolCall
from ..core.results import ToolResult
from ..errors import UsageError
from ..invoke.invoker import ToolInvoker
from ..invoke.policy import ChainPolicy
from ..invoke.results import ChainRunResult, InvocationResult
from ..invoke.session import InvokerSession
from ..sandbox.base import Limits, RunOptions, Sandbox
from ..sandbox.detect import default_sandbox
from ..tools.tool import Tool
from .prelude import MAX_FRAME, PRELUDE
from .signatures import function_name, signature

__all__ = ["ToolChainTool"]

PYTHON = "/usr/bin/python3"
NAME = "tool_chain"


class ToolChainTool(Tool):
    """A tool that runs a model-written Python script calling other tools, in a sandbox.

    Args:
        invoker: The door every call of the script goes through.
        tools: The tools the script may call (by name); by default every tool of the
            invoker's catalog but this one and hosted tools.
        policy: Limits of a run (``ChainPolicy``: 50 calls, 60 s per call, 300 s in total…).
        sandbox: Where scripts run; by default the best the host offers. A sandbox that
            cannot confine (``unconfined``) or pass the bridge is refused.
    """

    _invoker: ToolInvoker
    _allowed: tuple[str, ...] | None
    _policy: ChainPolicy
    _sandbox: Sandbox | None

    def __init__(self, invoker: ToolInvoker, *, tools: Sequence[str] | None = None,
                 policy: ChainPolicy | None = None, sandbox: Sandbox | None = None) -> None:
        self.__dict__.update(_invoker=invoker, _allowed=tuple(tools) if tools else None,
                             _policy=policy or ChainPolicy(), _sandbox=sandbox)
        super().__init__(name=NAME, description=self._describe(),
                         parameters={"type": "object", "properties": {"code": {
                             "type": "string", "description": "The Python script to run."}},
                             "required": ["code"]},
                         callable=self._run_tool, is_async=True)

    # -- what the script may call ------------------------------------------------------

    def callable_tools(self) -> list[Any]:
        catalog = self._invoker.registry
        names = self._allowed if self._allowed is not None else catalog.names()
        found = []
        for name in names:
            tool = catalog.get(name)
            if tool is None or name == NAME or getattr(tool, "kind", "function") != "function":
                continue
            found.append(tool)
        return found

    def _describe(self) -> str:
        listed = "\n\n".join(signature(t) for t in self.callable_tools())
        return ("Run a Python script that calls tools and combines their results, in a "
                "sandbox without network or host files. Call a tool as a function with keyword "
                "arguments (or call_tool(name, {...})); it returns a result with .status, "
                ".text, .structured and .ok. print() what the user should see and set "
                "`result = ...` to return a value. search_tools(query) lists more tools.\n\n"
                "Tools:\n\n" + listed)

    # -- running -----------------------------------------------------------------------

    async def _run_tool(self, code: str) -> ToolResult:
        run = await self.run_chain(code)
        lines = [f"status: {run.status}", *(
            f"call {i}: {r.tool} → {r.status}" for i, r in enumerate(run.call_trace, 1))]
        if run.output_text:
            lines.append("output:\n" + run.output_text)
        if run.value is not None:
            lines.append("result: " + json.dumps(run.value, default=repr)[:4096])
        return ToolResult.text_result("\n".join(lines), is_error=run.status != "ok",
                                      structured_content={"status": run.status,
                                                          "value": run.value})

    async def run_chain(self, code: str) -> ChainRunResult:
        """Run ``code`` once in a fresh sandbox; every call it makes goes through the invoker."""
        sandbox = self._sandbox or default_sandbox()
        if sandbox is None or not sandbox.confined:
            raise UsageError("code mode needs an OS sandbox (bubblewrap); none is available "
                             "here, and a script never runs in the host process")
        policy = self._policy
        started = time.monotonic()
        host, child = socket.socketpair()
        secret = secrets.token_hex(16)
        bridge = _Bridge(self, host, secret)
        bridge.code = code
        outcome: dict[str, Any] = {}
        async with self._invoker.open_session(chain=True) as session:
            session.policy = policy  # this chain's limits: its budget, timeouts
            bridge.session = session
            with tempfile.TemporaryDirectory(prefix="toolkeeper-chain-") as workdir:
                os.chmod(workdir, 0o777)
                options = RunOptions(
                    timeout_s=policy.total_timeout_s, output_cap=64 << 10,
                    env={"TOOLKEEPER_BRIDGE_FD": str(child.fileno()),
                         "TOOLKEEPER_BRIDGE_SECRET": secret, "PYTHONDONTWRITEBYTECODE": "1"},
                    limits=Limits(cpu_s=int(policy.total_timeout_s) + 1, processes=32,
                                  memory=512 << 20, file_bytes=16 << 20),
                    pass_fds=(child.fileno(),))
                async with anyio.create_task_group() as group:
                    group.start_soon(bridge.serve)
                    try:
                        outcome["run"] = await anyio.to_thread.run_sync(
                            sandbox.run, Path(workdir), [PYTHON, "-I", "-S", "-c", PRELUDE],
                            options)
                    finally:
                        child.close()
                        group.cancel_scope.cancel()
                        bridge.stop()
            trace = tuple(session.trace)
        result = outcome["run"]
        status: Literal["ok", "error", "timeout", "killed"] = (
            "timeout" if result.timed_out else "killed" if result.oom_killed or (
            result.exit_code is not None and result.exit_code < 0) else
            "ok" if bridge.done and result.exit_code == 0 else "error")
        text = result.stdout
        if bridge.error:
            text += ("\n" if text else "") + bridge.error
        elif status != "ok" and result.stderr:
            text += ("\n" if text else "") + result.stderr[-2000:]
        return ChainRunResult(status=status, output_text=text[-16_000:], call_trace=trace,
                              duration_ms=(time.monotonic() - started) * 1000,
                              value=bridge.value)


class _Bridge:
    """The host's side of one run's channel, served from a worker thread."""

    def __init__(self, chain: ToolChainTool, sock: socket.socket, secret: str) -> None:
        self.chain, self.sock, self.secret = chain, sock, secret
        self.session: InvokerSession | None = None
        self.allowed = {t.name: t for t in chain.callable_tools()}
        self.value: Any = None
        self.done = False
        self.error = ""
        self._stopped = threading.Event()

    def stop(self) -> None:
        self._stopped.set()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()

    async def serve(self) -> None:
        """Answer the script's frames in the event loop (no thread hop per call)."""
        self.sock.setblocking(False)
        try:
            await self._send({"type": "start", **self._start()})
            while True:
                frame = await self._receive()
                if frame is None:
                    return
                if not secrets.compare_digest(str(frame.get("secret", "")), self.secret):
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
                    await self._send({"signatures": self._search(frame)})
                else:
                    self.error = f"the bridge received an unknown frame type {kind!r}"
                    return
        except (OSError, ValueError) as exc:
            if not self._stopped.is_set():
                self.error = f"the bridge closed: {exc}"
        finally:
            # whatever ended the bridge (the script finished, broke the protocol or forged a
            # frame), the script's end reads EOF now: it cannot wait on an answer forever
            self.stop()

    def _start(self) -> dict[str, Any]:
        return {"code": self.code, "tools": [
            {"name": name, "function": function_name(name)} for name in self.allowed]}

    code = ""

    async def _call(self, frame: dict[str, Any]) -> dict[str, Any]:
        name, arguments = str(frame.get("tool", "")), frame.get("arguments")
        if name not in self.allowed:
            why = ("code mode cannot call itself" if name == NAME else
                   f"tool {name!r} is not callable from this chain (callable: "
                   f"{', '.join(sorted(self.allowed)) or 'none'})")
            return {"status": "denied", "text": why, "error_code": "policy_violation"}
        assert self.session is not None
        call = ToolCall(id=f"chain-{frame.get('id')}", name=name,
                        arguments=arguments if isinstance(arguments, dict) else {})
        result = await self.chain._invoker.invoke(call, session=self.session)
        return _shown(result, self.chain._policy.max_inline_result_bytes)

    def _search(self, frame: dict[str, Any]) -> list[str]:
        hits = self.chain._invoker.registry.search(str(frame.get("query", "")),
                                                   limit=max(1, min(int(frame.get("limit", 5)),
                                                                    20)))
        return [signature(self.allowed[h.name]) for h in hits if h.name in self.allowed]

    async def _send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, default=repr).encode("utf-8")
        view = memoryview(struct.pack(">I", len(data)) + data)
        while view:
            try:
                view = view[self.sock.send(view):]
            except BlockingIOError:
                await anyio.wait_writable(self.sock)

    async def _receive(self) -> dict[str, Any] | None:
        head = await self._exact(4)
        if head is None:
            return None
        (size,) = struct.unpack(">I", head)
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
        data = b""
        while len(data) < size:
            try:
                chunk = self.sock.recv(size - len(data))
            except BlockingIOError:
                await anyio.wait_readable(self.sock)
                continue
            if not chunk:
                return None
            data += chunk
        return data


def _shown(result: InvocationResult, inline: int) -> dict[str, Any]:
    """What the script gets back: the text cut to ``inline`` bytes with a note."""
    text = result.text
    data = text.encode("utf-8")
    if inline and len(data) > inline:
        text = data[:inline].decode("utf-8", "ignore") + (
            f"\n[... {len(data) - inline} more bytes not shown]")
    return {"status": result.status, "text": text, "structured": result.structured,
            "artifact_ref": result.artifact_ref, "error_code": result.error_code,
            "files": [f.path for f in result.files] if result.files else []}
