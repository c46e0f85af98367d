"""Code mode: the model writes a Python script that calls tools; it runs in an OS sandbox and
every call crosses back through the same door.

``ToolChainTool(invoker)`` is a tool named ``tool_chain`` with one parameter, ``code``. Each run
gets a fresh ``python3`` inside the sandbox (bubblewrap: no network, no host files beyond the
read-only system, a private ``/tmp`` and an empty private scratch directory, a cleared
environment, rlimits; or the Landlock fallback), with one end of a socket pair as its only way
out — started for the run, or taken from a pool of pre-started ones (``warm``). The script's
side of the bridge (``prelude.py``) turns each tool call into a frame; the host
(``bridge.py``), in its event loop, checks it and passes it to ``ToolInvoker.invoke`` with the
run's own session (budget, timeouts, approval, guardrails, audit), which records it in the
trace before the answer goes back. The host kills the whole sandbox at the total time limit;
whatever happened, the result lists every call that ran.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Literal

import anyio

from ..approval.journal import RunJournals, journals_of
from ..builtins.policy import SecurityPolicy
from ..builtins.preflight import Preflight
from ..builtins.protected import Protection
from ..core.context import LIBRARY, Caller, ToolContext
from ..core.metadata import ToolMetadata
from ..core.results import ToolResult
from ..errors import ApprovalPending, PolicyViolationError, SandboxUnavailableError, UsageError
from ..invoke.invoker import ToolInvoker
from ..invoke.policy import ChainPolicy
from ..invoke.results import ChainCallRecord, ChainRunResult
from ..invoke.tracing import failed, span
from ..sandbox.base import Overlay, Sandbox, SharedPath
from ..sandbox.bubblewrap import BubblewrapSandbox, prepare_spare
from ..sandbox.detect import default_sandbox
from ..sandbox.overlay import new_overlay
from ..tools.tool import Tool
from .bridge import NAME, Bridge
from .journal import RunLog
from .runner import Started, WarmPool, run_limits
from .signatures import function_names, signature
from .slots import MAX_RUNS, MAX_RUNS_PER_CLIENT, SLOT_WAIT_S, RunSlots

__all__ = ["ToolChainTool"]

MAX_CODE_BYTES = 256 << 10
"""The largest script a run accepts."""
LISTED = 40
"""Tools the description lists as signatures; the rest are found with ``search_tools``."""
VALUE_CHARS = 4096
"""Characters of the script's ``result`` the model reads."""
SHOWN_CALLS = 100
"""Calls (and files) listed one per line in what the model reads."""
KILL_WAIT_S = 10.0
"""How long a killed sandbox may take to be gone (a fork bomb's teardown) before the run
answers anyway."""
DRAIN_S = 5.0
"""How long the frames a script sent before it ended may take to be read (the socket is
at EOF once the sandbox is gone, so this bounds only a host too busy to read them)."""
PAUSED_TTL_S = 3600.0
"""How long a request a paused run waits on stays approvable, when the chain's policy does not
say (``approval_ttl_s``)."""
class ToolChainTool(Tool):
    """A tool that runs a model-written Python script calling other tools, in a sandbox.

    Args:
        invoker: The door every call of the script goes through.
        tools: The tools the script may call (by name); by default every tool of the
            invoker's catalog but this one and hosted tools.
        policy: Limits of a run (``ChainPolicy``: 50 calls, 60 s per call, 300 s in total…).
        sandbox: Where scripts run; by default the best the host offers. A sandbox that
            cannot confine (``unconfined``) is refused.
        workspace: A host directory the script may read (at its own path; the script's
            global ``WORKSPACE`` names it). None by default: the script sees no host files.
        writable: Whether the script may also change ``workspace`` (never under a policy
            whose ``autonomy`` or ``read_only`` says no writes). Where the sandbox can make a
            copy-on-write view (bubblewrap), the script's writes reach the workspace when the
            run ends: the tools it calls see the workspace as it was before the run.
        security: The rules of the file tools and ``shell`` that the mount follows too: its
            forbidden paths (at any depth) and every toolkeeper state folder are hidden from
            the script, and what a script writes at one is never applied to the workspace
            (under Landlock, which has no view, it is removed after the run). By default a
            ``SecurityPolicy`` for ``workspace`` with the default forbidden paths; its
            workspace must be ``workspace``.
        warm: How many sandboxes to keep started ahead of runs (each serves one run; taking
            one starts its replacement). 0 (the default) starts one per run.
        idle_s: How long a pre-started sandbox may wait before it is replaced.
        trace_limit: The trace records a run keeps (the last ones; ``DEFAULT_TRACE_LIMIT``
            unless given): ``ChainRunResult.trace_dropped`` counts those it let go.
        max_runs: Scripts run at once (``MAX_RUNS``); a run waits up to ``SLOT_WAIT_S`` for
            a place, then is refused (``policy_violation``, naming the limit).
        max_runs_per_client: Of those, how many one session (one client under ``serve``)
            may hold (``MAX_RUNS_PER_CLIENT``).
    """

    runs_scripts = True
    _invoker: ToolInvoker
    _allowed: tuple[str, ...] | None
    _policy: ChainPolicy
    _sandbox: Sandbox | None
    _shared: tuple[SharedPath, ...]
    _protection: Protection | None
    _trace_limit: int | None
    _pool: WarmPool
    _journals: RunJournals | None
    slots: RunSlots

    def __init__(self, invoker: ToolInvoker, *, tools: Sequence[str] | None = None,
                 policy: ChainPolicy | None = None, sandbox: Sandbox | None = None,
                 workspace: str | Path | None = None, writable: bool = False, warm: int = 0,
                 idle_s: float = 300.0, security: SecurityPolicy | None = None,
                 trace_limit: int | None = None, max_runs: int = MAX_RUNS,
                 max_runs_per_client: int = MAX_RUNS_PER_CLIENT) -> None:
        if warm < 0 or idle_s <= 0:
            raise UsageError("warm must be 0 or more and idle_s more than 0")
        shared: tuple[SharedPath, ...] = ()
        protection = None
        if workspace is not None:
            path = Path(workspace).resolve()
            if not path.is_dir():
                raise UsageError(f"the code-mode workspace {str(path)!r} is not a directory")
            if security is not None and security.workspace != path:
                raise UsageError(f"the security policy is for {str(security.workspace)!r}, not "
                                 f"the code-mode workspace {str(path)!r}; pass one for it")
            security = security or SecurityPolicy(workspace=path)
            writable = writable and not security.read_only and security.autonomy != "read_only"
            shared = (SharedPath(path, writable=writable),)
            protection = Protection(security, path)
        journals = journals_of(invoker.approvals.store)
        policy = policy or ChainPolicy()
        if journals is not None and policy.approval_ttl_s is None:  # a paused run's request
            policy = policy.model_copy(update={"approval_ttl_s": PAUSED_TTL_S})  # outlives it
        self._invoker, self._allowed = invoker, tuple(tools) if tools else None
        self._policy, self._sandbox, self._shared = policy, sandbox, shared
        self._protection, self._trace_limit = protection, trace_limit
        self._journals = journals
        self.slots = RunSlots(max_runs, max_runs_per_client)
        self._pool = WarmPool(warm, idle_s, self._start)
        super().__init__(name=NAME, description=self._describe(),
                         parameters={"type": "object", "properties": {"code": {
                             "type": "string", "description": "The Python script to run."}},
                             "required": ["code"]},
                         callable=self._run_tool, is_async=True,
                         # the run keeps its own total limit; the door around it must not cut
                         # it first (and leave a killed sandbox's teardown room to answer)
                         metadata=ToolMetadata(
                             timeout=self._policy.total_timeout_s + KILL_WAIT_S
                             + SLOT_WAIT_S + 5),
                         preflight=Preflight(self._sandbox_or_refuse, blocked=self._blocked))

    # -- what the script may call ------------------------------------------------------

    def callable_tools(self) -> list[Tool]:
        catalog = self._invoker.registry
        names = self._allowed if self._allowed is not None else catalog.names()
        found = []
        for name in names:
            tool = catalog.get(name)
            if name == NAME or not isinstance(tool, Tool):  # function tools only
                continue
            found.append(tool)
        return found

    def description_for(self, caller: Caller) -> str:
        """The description as ``caller`` reads it: only the tools it may call are listed (a
        client whose access token covers some tools never reads the others' names)."""
        return self._describe(caller)

    def _describe(self, caller: Caller = LIBRARY) -> str:
        tools = [t for t in self.callable_tools() if caller.may_use(t.name)]
        functions = function_names(t.name for t in tools)
        listed = "\n\n".join(signature(t, functions[t.name]) for t in tools[:LISTED])
        if len(tools) > LISTED:
            listed += (f"\n\n… and {len(tools) - LISTED} more tools: search_tools(query) "
                       "returns their signatures.")
        where = "without network or host files"
        if self._shared:
            access = "read-write" if self._shared[0].writable else "read-only"
            where = (f"without network; the only host files are the workspace at "
                     f"{self._shared[0].path} ({access}; the global WORKSPACE names it; its "
                     "protected paths such as .git, .envrc and .mcp.json cannot be read or "
                     "written" + ("; the script's writes reach the workspace when the run "
                                  "ends, and tools it calls see the workspace as it was"
                                  if access == "read-write" else "") + ")")
        return ("Run a Python script that calls tools and combines their results, in a "
                f"sandbox {where}. Call a tool as a function with keyword "
                "arguments (or call_tool(name, {...})); it returns a result with .status, "
                ".text, .structured and .ok. print() what the user should see and set "
                "`result = ...` to return a value. search_tools(query) lists more tools.\n\n"
                "Tools:\n\n" + listed)

    # -- running -----------------------------------------------------------------------

    def _ctx_param(self) -> str | None:
        return "ctx"  # the call's context names the session (the client) the run belongs to

    async def _run_tool(self, code: str, ctx: ToolContext | None = None) -> ToolResult:
        run = await self.run_chain(code, session_id=ctx.session_id if ctx else None,
                                   caller=ctx.caller if ctx else None, origin=ctx)
        trace = run.call_trace
        lines = [f"status: {run.status}", *(
            f"call {i}: {r.tool} → {r.status}" + (f" ({r.error_code})" if r.error_code else "")
            + (" [from the journal: nothing ran]" if r.replayed else "")
            for i, r in enumerate(trace[:SHOWN_CALLS], 1))]
        if len(trace) > SHOWN_CALLS:
            lines.append(f"… and {len(trace) - SHOWN_CALLS} more calls")
        lines += [f"file: {f.path} ({f.media_type}, {f.size} bytes, artifact {f.artifact_ref})"
                  for f in run.files[:SHOWN_CALLS]]
        if run.output_text:
            lines.append("output:\n" + run.output_text)
        value = run.value
        if value is not None:
            shown = json.dumps(value, default=repr)
            lines.append("result: " + shown[:VALUE_CHARS] + (
                f" [... {len(shown) - VALUE_CHARS} more characters]"
                if len(shown) > VALUE_CHARS else ""))
            if len(shown) > VALUE_CHARS:
                value = None  # the model reads the cut text, not a megabyte of structure
        if run.status == "pending" and run.approval_id is not None:
            raise ApprovalPending("\n".join(lines), request_id=run.approval_id)
        told = ToolResult.text_result("\n".join(lines), is_error=run.status != "ok",
                                      structured_content={"status": run.status,
                                                          "value": value})
        if run.status == "expired":
            return told.model_copy(update={"error_code": "expired"})
        return told

    def _sandbox_or_refuse(self, code: str = "") -> Sandbox:
        """The sandbox scripts run in; also the tool's pre-flight (whatever ``code`` is).

        Raises:
            SandboxUnavailableError: there is none that confines here.
        """
        sandbox = self._sandbox or default_sandbox()
        if sandbox is None or not sandbox.confined:
            raise SandboxUnavailableError(
                "code mode needs an OS sandbox (bubblewrap or Landlock); none is available "
                "here, and a script never runs in the host process", tool_name=NAME)
        return sandbox

    @property
    def blocked(self) -> str | None:
        """Why no script can run here (``None``: scripts can)."""
        return self._blocked()

    def _blocked(self) -> str | None:
        """Why no script can run here (``None``: scripts can)."""
        try:
            self._sandbox_or_refuse()
        except SandboxUnavailableError as exc:
            return exc.message
        return None

    def _start(self, spare_gate: bool = False) -> Started:
        policy, sandbox, protection = self._policy, self._sandbox_or_refuse(), self._protection
        shared, before = self._shared, None
        if protection is not None:  # what the mount hides is decided now, from fds
            before = protection.state()
            hidden = protection.hidden(before) if sandbox.protects_paths else ()
            shared = tuple(SharedPath(s.path, s.writable, hidden, _view(s, sandbox))
                           for s in shared)
        # the sandbox's own deadline is a backstop: the run's limit is kept by the host from
        # the moment a run takes the sandbox (a pre-started one may have waited idle_s)
        return Started(sandbox, timeout_s=self._pool.idle_s + policy.total_timeout_s + 5,
                       cpu_s=int(policy.total_timeout_s) + 1, shared=shared, before=before,
                       settle=None if protection is None else functools.partial(
                           protection.settle, who="the script"), spare_gate=spare_gate)

    def _take(self, sandbox: Sandbox) -> Started:
        """A sandbox for one run, claimed: a pre-started one if the mount's protected paths
        are as they were when it started (else it would hide the wrong entries), or a new one.

        Raises:
            PolicyViolationError: the sandbox cannot hide paths (Landlock) and a protected
                path exists in the mount.
        """
        protection = self._protection
        if protection is not None and not sandbox.protects_paths:
            protection.prepare(sandbox, protection.state(), tool=NAME)  # before anything starts
        run = self._pool.take()
        if run is not None and protection is not None and run.before != protection.state():
            run.discard()
            run = None
        run = run or self._start(spare_gate=True)  # a run waits: it takes the spare gate
        try:
            if protection is not None and run.before is not None:
                protection.prepare(sandbox, run.before, tool=NAME)
        except BaseException:
            run.discard()
            raise
        run.claim()
        return run

    def warm_up(self) -> None:
        """Start the pre-started sandboxes now rather than at the first run, and prepare the
        spare launch gate the first cold run takes (bubblewrap)."""
        self._pool.fill()
        sandbox = self._sandbox_or_refuse()
        if isinstance(sandbox, BubblewrapSandbox):
            prepare_spare(run_limits(int(self._policy.total_timeout_s) + 1))

    def close(self) -> None:
        """Kill the pre-started sandboxes (they also die with this process)."""
        self._pool.close()

    async def run_chain(self, code: str, *, session_id: str | None = None,
                        caller: Caller | None = None, origin: ToolContext | None = None
                        ) -> ChainRunResult:
        """Run ``code`` once in a fresh sandbox; every call it makes goes through the invoker.

        The run has its own session (budget, trace, pins) with the id ``session_id`` — the
        session that called ``tool_chain``, so the script's calls are recorded, audited and
        asked about under the client that ran it; a fresh id when ``None``. ``origin``: the
        request that runs it, whose MCP revision and era its calls speak (for the policies).

        Raises:
            UsageError: no confining sandbox here, or ``code`` is not a string of at most
                ``MAX_CODE_BYTES``.
            PolicyViolationError: the sandbox cannot hide the mount's protected paths
                (Landlock) and one exists.

        With tracing set up, the run is a span (``code_mode run``) and each call the script
        makes is an ``execute_tool`` span inside it.
        """
        tracer = self._invoker.tracing.tracer()
        if tracer is None:
            return await self._run_chain(code, session_id, caller, origin)
        with span(tracer, "code_mode run", {"toolkeeper.code_mode.tool": self.name}) as current:
            try:
                run = await self._run_chain(code, session_id, caller, origin)
            except BaseException as exc:
                failed(current, type(exc).__name__)
                raise
            current.set_attributes({"toolkeeper.code_mode.status": run.status,
                                    "toolkeeper.code_mode.calls": len(run.call_trace)})
            if run.status not in ("ok", "pending"):  # a paused run waits; it did not fail
                failed(current, run.status)
            return run

    async def _run_chain(self, code: str, session_id: str | None, caller: Caller | None,
                         origin: ToolContext | None = None) -> ChainRunResult:
        if not isinstance(code, str) or len(code.encode("utf-8", "surrogatepass")
                                             ) > MAX_CODE_BYTES:
            raise UsageError(f"code must be a Python script of at most {MAX_CODE_BYTES} bytes; "
                             "split the work into smaller scripts")
        sandbox = self._sandbox_or_refuse()
        refused = await self.slots.take(session_id)
        if refused is not None:
            raise PolicyViolationError(f"the script did not run: {refused}", tool_name=NAME)
        try:
            return await self._run_in_place(code, sandbox, session_id, caller, origin)
        finally:
            self.slots.give(session_id)

    async def _run_in_place(self, code: str, sandbox: Sandbox, session_id: str | None,
                            caller: Caller | None, origin: ToolContext | None
                            ) -> ChainRunResult:
        policy = self._policy
        started = time.monotonic()
        log = None
        if self._journals is not None and session_id is not None:  # it can be found again
            log = RunLog(self._journals, session_id=session_id, code=code)
            await log.load()
        run = self._take(sandbox)
        workspace = str(self._shared[0].path) if self._shared else None
        try:
            async with self._invoker.open_session(
                    session_id=session_id, chain=True, policy=policy,  # its own limits
                    trace_limit=self._trace_limit,
                    caller=(caller or LIBRARY).through("code_mode")) as session:
                if origin is not None:
                    session.protocol, session.era = origin.protocol, origin.era
                bridge = Bridge(self, run.host, run.secret, session, code, workspace, log=log,
                                kill=run.cancel.set)
                await _serve_until_ended(run, bridge, policy.total_timeout_s)
                trace = tuple(session.trace)
            dropped = (session.trace_dropped, session.audit_dropped)  # counted to its close
        finally:
            run.discard()  # a cancelled run kills its sandbox too
        if run.failure is not None:
            raise run.failure
        outcome = _outcome(run, bridge, trace, started)
        if bridge.ended is not None:
            outcome = self._stopped(outcome, bridge)
        elif log is not None and not log.diverged:
            outcome = await _journal_end(log, outcome)
        return replace(outcome, trace_dropped=dropped[0], audit_dropped=dropped[1])

    def _stopped(self, outcome: ChainRunResult, bridge: Bridge) -> ChainRunResult:
        """The outcome of a run that stopped at a call: paused on a request, or found the
        request its journal's run paused on expired."""
        stop = bridge.ended
        assert stop is not None
        at = f"call {stop.seq} ('{stop.tool}'" + (f", line {stop.line}" if stop.line else "") + ")"
        journaled = "" if stop.seq == 1 else (
            ("the call before it is" if stop.seq == 2 else f"the {stop.seq - 1} calls before "
             "it are") + " answered from the run's journal (not run again), ")
        if stop.kind == "paused":
            said = (f"The script paused at {at}: it waits for a person to approve request "
                    f"{stop.request_id} ({self._invoker.approvals.where(stop.request_id)}). "
                    f"Nothing after it ran. Once a person has decided, call {NAME} again with "
                    f"exactly the same code: {journaled}the approved call runs once and the "
                    "script goes on; you then get its output (a denied call is answered to the "
                    "script as denied).")
        else:
            said = (f"Request {stop.request_id} for {at} expired: nobody decided in time. It "
                    f"did not run, nor anything after it. Call {NAME} again with the same code "
                    f"to ask again: {journaled}the call asks a person anew.")
        text = outcome.output_text + ("\n" if outcome.output_text else "") + said
        return replace(outcome, status="pending" if stop.kind == "paused" else "expired",
                       output_text=text, approval_id=stop.request_id)


async def _journal_end(log: RunLog, outcome: ChainRunResult) -> ChainRunResult:
    """A run that ended without pausing leaves no journal — unless its limits cut it while it
    had one: a call may have been waiting for a person, and that request outlives the run, so
    the same script sent again must answer what already ran from the journal."""
    if not (log.stored and outcome.status in ("timeout", "killed")):
        await log.ended()
        return outcome
    kept = ("[the run's journal is kept: sent again unchanged, the script has the calls that "
            "ran answered from it (not run again), and a call a person was asked about joins "
            "its request]")
    return replace(outcome, output_text=outcome.output_text + (
        "\n" if outcome.output_text else "") + kept)


async def _serve_until_ended(run: Started, bridge: Bridge, total_s: float) -> None:
    """Answer the script's frames until its sandbox has ended (killed at ``total_s``)."""
    served = anyio.Event()

    async def serve() -> None:
        try:
            await bridge.serve()
        finally:
            served.set()

    async with anyio.create_task_group() as group:
        group.start_soon(serve)
        if await run.wait(total_s):
            # the script's last frames ('done' among them) may still wait in the socket when
            # the sandbox's end wakes this task first: they are read, to EOF
            with anyio.move_on_after(DRAIN_S):
                await served.wait()
        else:
            run.cancel.set()  # the total limit: the whole sandbox goes
            await run.wait(KILL_WAIT_S)
        group.cancel_scope.cancel()
        bridge.stop()


def _view(shared: SharedPath, sandbox: Sandbox) -> Overlay | None:
    """A copy-on-write view for a writable mount, where the sandbox can make one."""
    if not (shared.writable and sandbox.overlays):
        return None
    try:
        return new_overlay()
    except OSError as exc:
        raise SandboxUnavailableError(f"the sandbox could not start (its private directory: "
                                      f"{exc.strerror or exc}); the script did not run",
                                      tool_name=NAME) from exc


def _outcome(run: Started, bridge: Bridge, trace: tuple[ChainCallRecord, ...], started: float
             ) -> ChainRunResult:
    result = run.result
    if result is None:  # the sandbox did not end within KILL_WAIT_S of being killed
        status: Literal["ok", "error", "timeout", "killed"] = "killed"
        stdout = stderr = ""
    else:
        status = ("error" if bridge.killed else "timeout" if result.timed_out else "killed"
                  if result.oom_killed or (result.exit_code is not None and result.exit_code < 0)
                  else "ok" if bridge.done and result.exit_code == 0 else "error")
        stdout, stderr = result.stdout, result.stderr
    text = stdout
    if bridge.error:
        text += ("\n" if text else "") + bridge.error
    elif bridge.ended is not None:
        pass  # said by the run (_stopped), not the script's traceback
    elif status != "ok" and stderr:
        text += ("\n" if text else "") + stderr[-2000:]
    text = text[-16_000:]
    if bridge.notes:
        text += ("\n" if text else "") + "\n".join(bridge.notes)
    if run.refused:  # said after the cut: the model always reads it
        text += ("\n" if text else "") + run.refused
    return ChainRunResult(status=status, output_text=text, call_trace=trace,
                          duration_ms=(time.monotonic() - started) * 1000,
                          value=bridge.value, files=tuple(bridge.files))
