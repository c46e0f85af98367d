"""Record: the outermost gate — TOOL_START before, and on every outcome (cancellation
included) the session's trace, the audit log and TOOL_END after."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import cast

import anyio

from ...approval.models import args_digest
from ...errors import CallCancelledError, InvalidArgumentsError
from ...hooks import HookEvent, HookManager
from ..audit import AuditEntry, AuditLog, WritesAsync
from ..results import ChainCallRecord, InvocationResult, RecordStatus
from ..state import ApprovalTrail, Gate, Invocation, Next
from .errors import result_for

__all__ = ["TOLD_AGAIN", "RecordGate"]

TOLD_AGAIN = "told again: the approved run's result; nothing ran"
"""The audit row of a call answered with its approved run's result (its first caller may have
given up): ``ok``, and not a second run."""


_RECORDED: dict[str, RecordStatus] = {"timeout": "timeout", "expired": "expired"}
"""Error codes recorded as a status of their own: the tool ran out of time, or nobody decided
on its approval in time (neither a failure of the tool nor a denial)."""


def _told_again(result: InvocationResult) -> bool:
    return result.status == "ok" and not result.ran and result.approval_id is not None


def _refused(result: InvocationResult) -> str | None:
    """The decision of a call a gate refused and says so (``refused by preflight``)."""
    return f"refused by {result.refused_by}" if result.refused_by is not None else None


class RecordGate(Gate):
    name = "record"

    def __init__(self, audit: AuditLog | None = None, hooks: HookManager | None = None) -> None:
        self.audit = audit
        self.hooks = hooks

    @property
    def audit(self) -> AuditLog | None:
        return self._audit

    @audit.setter
    def audit(self, audit: AuditLog | None) -> None:
        # Asked once, not per call: a runtime-checkable protocol's isinstance walks its members.
        self._audit = audit
        self._writes_async = isinstance(audit, WritesAsync)

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        started = time.perf_counter()
        hooks = self.hooks
        if hooks is not None and hooks.has(HookEvent.TOOL_START):
            await hooks.dispatch(HookEvent.TOOL_START, {
                "tool": inv.call.name, "call_id": inv.call.id, "session": inv.session.id})
        digest: str | None = None
        if self.audit is not None:  # what the audit row will hold, before anything runs
            try:
                digest = args_digest(inv.call.arguments)
            except Exception as exc:  # whatever stops the digest stops the call
                return await self._unrecordable(inv, exc, started)
        result: InvocationResult | None = None
        try:
            result = await call_next(inv)
            return result
        finally:
            if result is None:  # the caller was cancelled: record it, then let it propagate
                result = result_for(inv, CallCancelledError(
                    f"the call to '{inv.call.name}' was cancelled", tool_name=inv.call.name))
                with anyio.CancelScope(shield=True):
                    await self._record(inv, result, started, digest)
            elif self.audit is None and (self.hooks is None
                                         or not self.hooks.has(HookEvent.TOOL_END)):
                self._trace(inv, result, started, digest)  # nothing to await
            else:
                await self._record(inv, result, started, digest)

    async def _unrecordable(self, inv: Invocation, exc: BaseException, started: float
                            ) -> InvocationResult:
        """Refuse a call whose arguments the audit log could not hold: it does not run (fail
        closed), and its row holds a stand-in for them."""
        message = (f"the arguments of '{inv.call.name}' cannot be recorded in the audit log "
                   f"({type(exc).__name__}); send plain JSON values")
        result = InvocationResult.failed("error", message, InvalidArgumentsError.code,
                                         **inv.envelope())
        call = replace(inv.call, arguments={"$refused": message}, raw_arguments=None)
        await self._record(inv._replace(call=call, arguments=call.arguments), result, started)
        return result

    @staticmethod
    def _trace(inv: Invocation, result: InvocationResult, started: float,
               digest: str | None) -> tuple[ChainCallRecord, float]:
        """The call's record in the session's trace, and its duration in ms."""
        duration = (time.perf_counter() - started) * 1000
        code = result.error_code
        status = _RECORDED.get(code, result.status) if code is not None else result.status
        record = ChainCallRecord(tool=inv.call.name, call_id=inv.call.id, status=status,
                                 duration_ms=int(duration * 1000 + 0.5) / 1000, error_code=code,
                                 args_digest=digest, arguments=inv.call.arguments)
        inv.session.record(record)
        return record, duration

    async def _record(self, inv: Invocation, result: InvocationResult, started: float,
                      digest: str | None = None) -> None:
        record, duration = self._trace(inv, result, started, digest)
        status = record.status
        if self.audit is not None and inv.session.audit_admits(result.ran):
            trail = inv.approval or ApprovalTrail()
            told_again = _told_again(result)
            entry = AuditEntry(
                ts=time.time(), call_id=inv.call.id, session_id=inv.session.id,
                tool=inv.call.name, args_digest=record.args_digest, arguments=inv.call.arguments,
                status=status, error_code=result.error_code, duration_ms=duration,
                approval_id=result.approval_id or trail.id,
                decision=TOLD_AGAIN if told_again else trail.described() or _refused(result),
                approver=None if told_again else trail.approver)
            if self._writes_async:  # off the event loop
                await cast(WritesAsync, self.audit).record_async(entry)
            else:
                self.audit.record(entry)
        if self.hooks is not None and self.hooks.has(HookEvent.TOOL_END):
            await self.hooks.dispatch(HookEvent.TOOL_END, {
                "tool": inv.call.name, "call_id": inv.call.id, "session": inv.session.id,
                "client": inv.session.caller.client, "status": status, "duration_ms": duration,
                "error_code": result.error_code})
