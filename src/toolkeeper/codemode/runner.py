"""One sandbox started with the prelude, waiting for its script; and a pool of them.

A ``Started`` sandbox is a fresh ``python3 -I -S`` in the sandbox whose prelude has already
loaded and waits on the bridge for the start frame. Starting one takes tens of milliseconds
(the sandbox's launch chain and the interpreter); a run that takes a pre-started one
(``WarmPool``) only pays for sending its script. Each is used for exactly one run and then
gone with its private scratch directory, so nothing of one run reaches the next.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import os
import secrets
import socket
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio
import anyio.to_thread

from ..builtins.scan import TreeScan
from ..errors import SandboxUnavailableError
from ..sandbox.base import Limits, Overlay, RunOptions, Sandbox, SandboxResult, SharedPath
from ..sandbox.overlay import remove_overlay
from .prelude import BOOT, prelude_frame

__all__ = ["PYTHON", "Started", "WarmPool"]

PYTHON = "/usr/bin/python3"


Settle = Callable[[TreeScan, Overlay | None], str]
"""What happens to a run's writes once its sandbox is gone (``Protection.settle``): the line
the answer carries about what was refused."""


class Started:
    """A sandbox running the prelude in its own worker thread; ``host`` is the bridge's end.

    ``spare_gate``: a run waits for this start, so it takes a spare launch gate when one is
    ready (a warm pool's starts wait for nobody and leave the spare to cold runs).

    ``before`` is the scan of the mount's protected paths the sandbox was started from (what
    it hides); once a run has claimed the sandbox, ``settle(before, overlay)`` runs in that
    thread after every process of the sandbox is gone — the writes the script made through
    ``overlay`` are applied — and ``refused`` says what was not. A sandbox never claimed
    has run nothing: its overlay is dropped unread.
    """

    def __init__(self, sandbox: Sandbox, *, timeout_s: float, cpu_s: int,
                 shared: Sequence[SharedPath] = (), before: TreeScan | None = None,
                 settle: Settle | None = None, spare_gate: bool = False) -> None:
        self.before, self._settle = before, settle
        self.overlay = next((s.overlay for s in shared if s.overlay is not None), None)
        self.claimed = False
        self.refused = ""
        self.host, child = socket.socketpair()
        self.host.sendall(prelude_frame())  # read by BOOT first (the buffer holds it)
        self.secret = secrets.token_hex(16)
        self.scratch = tempfile.TemporaryDirectory(prefix="toolkeeper-chain-")
        os.chmod(self.scratch.name, 0o777)  # the sandbox's unprivileged user writes here
        self.cancel = threading.Event()
        self.finished = threading.Event()
        self._wakers: list[collections.abc.Callable[[], None]] = []
        self._wakers_lock = threading.Lock()
        self.result: SandboxResult | None = None
        self.failure: BaseException | None = None
        self.started = time.monotonic()
        options = RunOptions(
            timeout_s=timeout_s, output_cap=64 << 10, shared=tuple(shared), cancel=self.cancel,
            env={"TOOLKEEPER_BRIDGE_FD": str(child.fileno()), "PYTHONDONTWRITEBYTECODE": "1"},
            limits=run_limits(cpu_s),
            pass_fds=(child.fileno(),), spare_gate=spare_gate, scratch_bytes=SCRATCH_BYTES)
        thread = threading.Thread(target=self._run, args=(sandbox, child, options),
                                  name="toolkeeper-chain", daemon=True)
        _LIVE.add(self)
        thread.start()

    def _run(self, sandbox: Sandbox, child: socket.socket, options: RunOptions) -> None:
        try:
            self.result = sandbox.run(Path(self.scratch.name),
                                      [PYTHON, "-I", "-S", "-c", BOOT], options)
            if self.result.start_error:
                self.failure = _unavailable(self.result.start_error)
        except OSError as exc:  # the launcher itself could not be started
            self.failure = _unavailable(exc.strerror or str(exc))
        except BaseException as exc:  # handed to the run that waits (UsageError)
            self.failure = exc
        finally:
            child.close()
            self._settle_writes()
            with contextlib.suppress(OSError):
                self.scratch.cleanup()  # never read: whatever the script left there goes
            with self._wakers_lock:
                self.finished.set()
                wakers, self._wakers = self._wakers, []
            for wake in wakers:
                wake()

    def _settle_writes(self) -> None:
        if not (self.claimed and self._settle is not None and self.before is not None):
            if self.overlay is not None:
                remove_overlay(self.overlay)
            return
        try:
            self.refused = self._settle(self.before, self.overlay)
        except Exception as exc:  # said in the answer; the thread must still finish
            self.refused = (f"[the script's writes could not all be applied ({exc}); check "
                            "the workspace]")
            if self.overlay is not None:
                remove_overlay(self.overlay)

    @property
    def alive(self) -> bool:
        return not self.finished.is_set()

    async def wait(self, timeout_s: float) -> bool:
        """Wait until the sandbox has ended, at most ``timeout_s``; whether it has.

        On asyncio the sandbox's thread wakes the loop when it ends, so a waiting run holds no
        worker thread (runs waiting in worker threads would starve the calls they make of the
        threads the audit log and the approval store need). Other backends wait in one."""
        if self.finished.is_set():
            return True
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        with anyio.move_on_after(timeout_s):
            if loop is None:
                await anyio.to_thread.run_sync(self.finished.wait, abandon_on_cancel=True)
            else:
                ended: asyncio.Future[None] = loop.create_future()

                def settle() -> None:
                    if not ended.done():
                        ended.set_result(None)

                def wake() -> None:
                    with contextlib.suppress(RuntimeError):  # the loop is already closed
                        loop.call_soon_threadsafe(settle)

                with self._wakers_lock:
                    if self.finished.is_set():
                        return True
                    self._wakers.append(wake)
                try:
                    await ended
                finally:
                    with self._wakers_lock, contextlib.suppress(ValueError):
                        self._wakers.remove(wake)
        return self.finished.is_set()

    def claim(self) -> None:
        """Mark the sandbox as running a script: its writes are settled after it (a
        pre-started one never claimed has run nothing)."""
        self.claimed = True

    def discard(self) -> None:
        """Kill the sandbox (within ~0.1 s) and close the host's end of the bridge."""
        self.cancel.set()
        with contextlib.suppress(OSError):
            self.host.close()


SCRATCH_BYTES = 256 << 20
"""What a script may write to its scratch folder (``/workspace``), in all: a memory file system
of the run's own under bubblewrap (past it, writes fail with ENOSPC)."""


def run_limits(cpu_s: int) -> Limits:
    """The limits of a code-mode sandbox."""
    return Limits(cpu_s=cpu_s, processes=32, memory=512 << 20, file_bytes=16 << 20)


_LIVE: weakref.WeakSet[Started] = weakref.WeakSet()
"""The sandboxes whose threads have not finished: ended before the interpreter exits."""
EXIT_WAIT_S = 5.0
"""Seconds the interpreter's exit waits, at most, for its sandboxes to be killed and gone."""


@atexit.register
def _end_all() -> None:
    """Kill the sandboxes still running (a warm pool's included) and wait for their threads
    to clean up: the interpreter ends its daemon threads unfinished, and a sandbox killed in
    the middle of its start can then wait forever (bubblewrap's init, its launcher gone)."""
    live = list(_LIVE)
    for started in live:
        started.discard()
    deadline = time.monotonic() + EXIT_WAIT_S
    for started in live:
        started.finished.wait(max(0.0, deadline - time.monotonic()))


def _unavailable(reason: str) -> SandboxUnavailableError:
    return SandboxUnavailableError(
        f"the sandbox could not start ({reason}); the script did not run. Try again later; if "
        "it keeps failing, the operator can check `toolkeeper doctor`", tool_name="tool_chain")


class WarmPool:
    """Up to ``size`` pre-started sandboxes; each serves one run, and taking one starts its
    replacement. A sandbox is replaced before it has waited ``idle_s`` (a pre-started one's
    own deadline): a keeper thread renews it at ``RENEW`` of that, so a run after a quiet hour
    still takes a started one. ``take`` also drops one that has died or waited too long."""

    RENEW = 0.9
    """The share of ``idle_s`` after which a waiting sandbox is replaced by a fresh one."""

    def __init__(self, size: int, idle_s: float, start: collections.abc.Callable[[], Started]
                 ) -> None:
        self.size, self.idle_s, self._start = size, idle_s, start
        self._ready: collections.deque[Started] = collections.deque()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._keeper: threading.Thread | None = None
        # a pool dropped without close() does not leave its sandboxes waiting, nor its keeper
        weakref.finalize(self, _discard_all, self._ready, self._closed)

    def fill(self) -> None:
        with self._lock:
            if self._closed.is_set():
                return
            while len(self._ready) < self.size:
                self._ready.append(self._start())
            if self._keeper is None and self.size:
                self._keeper = threading.Thread(target=_keep_fresh, name="toolkeeper-warm",
                                                args=(weakref.ref(self), self._closed,
                                                      self.idle_s * self.RENEW),
                                                daemon=True)
                self._keeper.start()

    def take(self) -> Started | None:
        """A live pre-started sandbox (its replacement starting), or ``None`` when none is."""
        found = None
        with self._lock:
            while self._ready and found is None:
                item = self._ready.popleft()
                if item.alive and time.monotonic() - item.started < self.idle_s:
                    found = item
                else:
                    item.discard()
        self.fill()
        return found

    def renew(self) -> float:
        """Replace the sandboxes that died or are due (``RENEW``); seconds until the next is."""
        due = self.idle_s * self.RENEW
        with self._lock:
            now = time.monotonic()
            kept = [item for item in self._ready if item.alive and now - item.started < due]
            for item in self._ready:
                if item not in kept:
                    item.discard()
            self._ready.clear()
            self._ready.extend(kept)
        self.fill()
        with self._lock:
            oldest = min((item.started for item in self._ready), default=time.monotonic())
        return max(0.05, oldest + due - time.monotonic())

    def close(self) -> None:
        with self._lock:
            self._closed.set()
            _discard_all(self._ready)


def _keep_fresh(pool_ref: weakref.ref[WarmPool], closed: threading.Event, wait: float
                ) -> None:
    """The keeper: renew the pool's sandboxes when due (the first after ``wait``), until it
    is closed or dropped (it holds the pool only while renewing, so a dropped pool is
    collected)."""
    while not closed.wait(wait):
        pool = pool_ref()
        if pool is None:
            return
        try:
            wait = pool.renew()
        except Exception:  # the sandbox cannot start now: a run will say why; try again later
            wait = pool.idle_s * (1 - pool.RENEW)
        del pool


def _discard_all(ready: collections.deque[Started], closed: threading.Event | None = None
                 ) -> None:
    if closed is not None:
        closed.set()
    while ready:
        ready.popleft().discard()
