"""``InvokerSession``: the per-run counters, trace and pins."""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections import deque
from types import TracebackType
from typing import TYPE_CHECKING

from ..artifacts.store import SharedBlobStore
from ..core.context import LIBRARY, Caller
from ..errors import BudgetExceededError, UsageError
from .audit import write_summary
from .holdings import Owner
from .results import ChainCallRecord

if TYPE_CHECKING:
    from .invoker import ToolInvoker
    from .policy import ChainPolicy

__all__ = ["DEFAULT_TRACE_LIMIT", "InvokerSession"]

DEFAULT_TRACE_LIMIT = 10_000
"""The trace records a session keeps in memory unless told otherwise: the last ones; the
session counts those it dropped (``trace_dropped``), and the audit log keeps every call."""


class InvokerSession:
    """Mutable state of one run: call budget, trace, pinned artifacts, session approvals.

    Use it as an async context manager: pinned artifacts are unpinned on exit, even when the
    body raises.
    """

    def __init__(self, invoker: ToolInvoker, *, session_id: str | None = None,
                 chain: bool = False, trace_limit: int | None = None,
                 policy: ChainPolicy | None = None, caller: Caller = LIBRARY) -> None:
        self.id = session_id or "ses_" + secrets.token_urlsafe(12)
        self.caller = caller
        """Who makes this session's calls (an MCP client, a code-mode run of one, a program)."""
        self.protocol = ""
        """The MCP revision its calls speak when they carry no context of their own (a
        code-mode run's: the request that ran the script); empty outside MCP."""
        self.era = ""
        """That revision's era (``handshake``, ``per-request``), as ``ToolContext.era``."""
        self.invoker = invoker
        self.policy: ChainPolicy = policy if policy is not None else invoker.policy
        """The limits of this session's calls: its own (a code-mode run's) when given, else
        the invoker's. Read once per call at the door (``Invocation.policy``)."""
        self.store = invoker.artifact_store
        self.chain = chain
        self.started = time.monotonic()
        self.state: dict[str, object] = {}
        self.grants: dict[str, float] = {}
        """Tools approved for this session (``scope="session"``): name → when the grant ends
        (``time.monotonic``)."""
        self._grantors: dict[str, str] = {}
        self.tools: frozenset[str] | None = None
        """The only tools this session may call (``None``: every tool of the catalog). A call
        to another is refused — ``denied``, ``policy_violation`` — and recorded like any call."""
        self._call_count = 0
        self._per_tool: dict[str, int] = {}
        self._per_namespace: dict[str, int] = {}
        if trace_limit is not None and trace_limit < 1:
            raise UsageError(f"trace_limit must be at least 1, got {trace_limit}")
        self.trace_limit: int = trace_limit or DEFAULT_TRACE_LIMIT
        """How many trace records this session keeps in memory (the last ones):
        ``DEFAULT_TRACE_LIMIT`` unless given. The audit log keeps everything."""
        self._trace: deque[ChainCallRecord] = deque(maxlen=self.trace_limit)
        self._dropped = 0
        self._audit_rows = 0
        self._audit_dropped = 0
        self._pinned: dict[str, float] = {}
        """The refs this session pinned, each with when (``time.monotonic``) it last did."""
        self._holder = json.dumps(list(self.owner))
        """Whom the store records the pins for: this session's owner, the same on every
        process (a store several replicas share tells one what the owner holds on another)."""
        self._pin_owner = f"{self._holder}#{secrets.token_urlsafe(9)}"
        """Each pin's owner: private to this object, since two sessions may share an id (a
        code-mode run records its calls under its client's session id) and one must never
        unpin the other's artifacts."""
        self._lock = threading.Lock()
        self.closed = False

    def grant(self, tool: str, seconds: float, *, approver: str = "") -> None:
        """Let ``tool`` run without asking in this session for ``seconds`` (``approver``: who
        granted it, named in the audit rows of the calls it lets run)."""
        with self._lock:
            self.grants[tool] = time.monotonic() + seconds
            self._grantors[tool] = approver

    def granted(self, tool: str) -> bool:
        """Whether a grant for ``tool`` holds now (an ended one is dropped)."""
        return self.grantor(tool) is not None

    def grantor(self, tool: str) -> str | None:
        """Who granted ``tool`` to this session ("" when not said), while the grant holds;
        ``None`` without one (an ended one is dropped)."""
        with self._lock:
            ends = self.grants.get(tool)
            if ends is not None and ends <= time.monotonic():
                del self.grants[tool]
                ends = None
            return self._grantors.get(tool, "") if ends is not None else None

    @property
    def call_count(self) -> int:
        return self._call_count

    @property
    def trace(self) -> tuple[ChainCallRecord, ...]:
        """The last ``trace_limit`` records, oldest first."""
        return tuple(self._trace)

    @property
    def trace_dropped(self) -> int:
        """How many records, oldest first, left the trace to keep it within ``trace_limit``
        (``trace_dropped + len(trace)`` calls were recorded in all)."""
        return self._dropped

    @property
    def audit_dropped(self) -> int:
        """Refused calls not stored one by one in the audit log, past the policy's
        ``max_audit_rows`` (one summary row says how many when the session closes)."""
        return self._audit_dropped

    def audit_admits(self, ran: bool) -> bool:
        """Whether a call's audit row is stored: always when it ran; a refused one only while
        the session has written fewer than ``max_audit_rows`` rows, else it is counted."""
        with self._lock:
            if not ran and self._audit_rows >= self.policy.max_audit_rows:
                self._audit_dropped += 1
                return False
            self._audit_rows += 1
            return True

    @property
    def pinned_refs(self) -> tuple[str, ...]:
        return tuple(self._pinned)

    def remaining_s(self) -> float:
        """Seconds left of the policy's total timeout."""
        return self.policy.total_timeout_s - (time.monotonic() - self.started)

    def reserve(self, tool: str, namespace: str | None) -> None:
        """Count one call against the session, tool and namespace budgets, atomically.

        Raises:
            BudgetExceededError: a budget is used up (nothing is counted then).
        """
        policy = self.policy
        with self._lock:
            if self._call_count >= policy.max_tool_calls:
                raise BudgetExceededError(
                    f"this session may make at most {policy.max_tool_calls} tool calls and has "
                    "used them all; finish with what you have", tool_name=tool)
            tool_limit = policy.tool_budgets.get(tool)
            if tool_limit is not None and self._per_tool.get(tool, 0) >= tool_limit:
                raise BudgetExceededError(f"tool '{tool}' may be called {tool_limit} time(s) per "
                                          "session and its budget is used up", tool_name=tool)
            ns_limit = policy.namespace_budgets.get(namespace) if namespace else None
            if ns_limit is not None and self._per_namespace.get(namespace or "", 0) >= ns_limit:
                raise BudgetExceededError(f"namespace '{namespace}' may be called {ns_limit} "
                                          "time(s) per session and its budget is used up",
                                          tool_name=tool)
            self._call_count += 1
            self._per_tool[tool] = self._per_tool.get(tool, 0) + 1
            if namespace:
                self._per_namespace[namespace] = self._per_namespace.get(namespace, 0) + 1

    def record(self, record: ChainCallRecord) -> None:
        with self._lock:
            if len(self._trace) == self.trace_limit:
                self._dropped += 1
            self._trace.append(record)

    @property
    def artifacts(self) -> tuple[str, ...]:
        """The artifacts this session's calls stored (pinned until it closes), then those its
        owner's sessions keep pinned in a store other processes share (another replica's)."""
        with self._lock:
            mine = tuple(self._pinned)
        return mine + tuple(ref for ref in self._shared() if ref not in mine)

    def _shared(self) -> list[str]:
        store = self.store
        return store.pinned_by(self._holder) if isinstance(store, SharedBlobStore) else []

    @property
    def owner(self) -> Owner:
        """Whose artifacts this session's calls may pass on: its id with its client's name (a
        client's session and its code-mode runs are one owner)."""
        return (self.id, self.caller.client)

    def holds(self, ref: str) -> bool:
        """Whether ``{"$artifact": ref}`` resolves for this session's calls: a session of the
        same owner (this one, its client's, a run of its client's) keeps it pinned."""
        return self.invoker.holdings.holds(self.owner, ref) or ref in self._shared()

    def pin(self, ref: str) -> None:
        store = self.store
        if store is not None:
            with self._lock:  # with the store's pin: a release meanwhile cannot undo it
                store.pin(ref, self._pin_owner)
                if self._pinned.pop(ref, None) is None:  # pinned again: the newest last
                    self.invoker.holdings.hold(self.owner, ref)
                self._pinned[ref] = time.monotonic()

    def release(self, older_than_s: float) -> int:
        """Unpin the artifacts this session last pinned more than ``older_than_s`` seconds ago
        (a session that lives as long as a server keeps each for a while, not for ever); they
        are no longer among its ``artifacts``. Returns how many."""
        cutoff = time.monotonic() - older_than_s
        with self._lock:
            old = [ref for ref, at in self._pinned.items() if at < cutoff]
            for ref in old:
                del self._pinned[ref]
                self.invoker.holdings.let_go(self.owner, ref)
                if self.store is not None:
                    self.store.unpin(ref, self._pin_owner)
        return len(old)

    async def close(self) -> None:
        """Unpin every artifact this session pinned; write the audit summary of the refused
        calls it counted rather than stored (``audit_dropped``), if any."""
        store = self.store
        with self._lock:
            refs, self._pinned = list(self._pinned), {}
            already, self.closed = self.closed, True
            dropped = self._audit_dropped
        for ref in refs:
            self.invoker.holdings.let_go(self.owner, ref)
            if store is not None:
                store.unpin(ref, self._pin_owner)
        if dropped and not already:
            await write_summary(self.invoker.audit, self.id, dropped,
                                self.policy.max_audit_rows)

    async def __aenter__(self) -> InvokerSession:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()
