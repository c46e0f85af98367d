"""How many code-mode scripts run at once: in all, and per session (one client under
``serve``). A run takes a place before its sandbox starts and gives it back when it ends."""

from __future__ import annotations

import threading
import time

import anyio

from ..errors import UsageError

__all__ = ["MAX_RUNS", "MAX_RUNS_PER_CLIENT", "SLOT_WAIT_S", "RunSlots"]

MAX_RUNS = 8
"""Scripts one ``ToolChainTool`` runs at once, by default (each may take 512 MiB and 32
processes)."""
MAX_RUNS_PER_CLIENT = 4
"""Of those, how many one session (under ``serve``, one client) may hold, by default."""
SLOT_WAIT_S = 30.0
"""How long a run waits for a free place before it is refused."""
SLOT_POLL_S = 0.05


class RunSlots:
    """How many runs are under way, in all and per session: a run takes a place before its
    sandbox starts and gives it back when it ends, whatever ended it. A place is waited for at
    most ``SLOT_WAIT_S``; thread-safe, and not bound to one event loop."""

    def __init__(self, total: int, per_session: int) -> None:
        if total < 1 or per_session < 1:
            raise UsageError("max_runs and max_runs_per_client must be 1 or more")
        self.total, self.per_session = total, per_session
        self._lock = threading.Lock()
        self._running = 0
        self._held: dict[str, int] = {}

    def _try(self, key: str | None) -> bool:
        with self._lock:
            if self._running >= self.total:
                return False
            if key is not None:
                held = self._held.get(key, 0)
                if held >= self.per_session:
                    return False
                self._held[key] = held + 1
            self._running += 1
            return True

    async def take(self, key: str | None, wait_s: float | None = None) -> str | None:
        """Take a place for a run of session ``key`` (``None``: counted in all only); ``None``
        once taken, else why not (within ``wait_s``, by default ``SLOT_WAIT_S``)."""
        deadline = time.monotonic() + (SLOT_WAIT_S if wait_s is None else wait_s)
        while not self._try(key):
            if time.monotonic() >= deadline:
                with self._lock:
                    mine = 0 if key is None else self._held.get(key, 0)
                if key is not None and mine >= self.per_session:
                    return (f"{mine} scripts of this client are already running (the limit is "
                            f"{self.per_session}: [codemode] max_runs_per_client); wait for "
                            f"one to end, then call tool_chain again")
                return (f"{self.total} scripts are already running (the limit: [codemode] "
                        f"max_runs); wait for one to end, then call tool_chain again")
            await anyio.sleep(SLOT_POLL_S)
        return None

    def give(self, key: str | None) -> None:
        with self._lock:
            self._running -= 1
            if key is not None:
                left = self._held.get(key, 1) - 1
                if left > 0:
                    self._held[key] = left
                else:
                    self._held.pop(key, None)

    @property
    def running(self) -> int:
        return self._running
