"""``PersistedApprovalHandler``: requests go to an ``ApprovalStore``; decisions come back from it.

The decision can arrive from another process (a web page, a CLI, a teammate). With ``wait_s`` the
handler polls the store for that long; with ``wait_s=0`` it answers ``pending`` at once and the
run ends with the request id, to be resumed later with ``ToolInvoker.resume``. ``release()``
(a server stopping) ends every wait at once with ``pending``, as if its time had run out: the
request stays in the store, to be decided and taken by the call made again.
"""

from __future__ import annotations

import anyio
import anyio.to_thread

from .models import ApprovalDecision, ApprovalRequest
from .store import AnnouncesChanges, ApprovalStore

__all__ = ["PersistedApprovalHandler"]


class PersistedApprovalHandler:
    """Stores each request and waits (bounded) for a decision to appear in the store."""

    def __init__(self, store: ApprovalStore, *, wait_s: float = 0.0, poll_s: float = 0.1) -> None:
        self.store = store
        self.wait_s = wait_s
        self.poll_s = poll_s
        self.released = False
        """Set by ``release``: no call waits any more (the server is stopping)."""
        self._waits: set[anyio.CancelScope] = set()

    def release(self) -> None:
        """End every wait now, and every later one at once, with ``pending`` (called from the
        event loop the waits run in)."""
        self.released = True
        for scope in list(self._waits):
            scope.cancel()

    async def request(self, request: ApprovalRequest) -> ApprovalDecision:
        await anyio.to_thread.run_sync(self.store.create, request)
        return await self.wait(request.id, self.wait_s)

    async def expire(self, decision: ApprovalDecision) -> None:
        """Record that the invoker stopped waiting, so a late answer cannot apply any more."""
        await anyio.to_thread.run_sync(self.store.decide, decision)

    async def wait(self, request_id: str, wait_s: float) -> ApprovalDecision:
        """The decision, or ``pending`` when none arrived within ``wait_s``."""
        store: object = self.store  # an optional ability, declared by the store
        listen = store.wait_for_change if isinstance(store, AnnouncesChanges) and \
            store.announces_changes else None
        with anyio.move_on_after(0 if self.released else wait_s) as scope:
            self._waits.add(scope)
            try:
                while True:
                    stored = await anyio.to_thread.run_sync(self.store.get, request_id)
                    if stored is not None and stored.decision is not None:
                        return stored.decision
                    if listen is not None:  # a NOTIFY from any replica wakes it;
                        # it re-reads at least every second (a lost notification only delays)
                        await anyio.to_thread.run_sync(listen, 1.0, abandon_on_cancel=True)
                    else:
                        await anyio.sleep(self.poll_s)
            finally:
                self._waits.discard(scope)
        return ApprovalDecision(request_id=request_id, outcome="pending",
                                message="waiting for a decision")
