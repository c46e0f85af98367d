"""Worker threads for sync tools: a lean hand-off from the event loop and back.

A job goes to an idle worker through a ``queue.SimpleQueue``; the result comes back with one
``loop.call_soon_threadsafe`` — the two thread wake-ups any hand-off needs and little else (on
par with ``loop.run_in_executor``, about 1.4× faster than ``anyio.to_thread.run_sync``; see
``benchmarks/bench_invoke.py``). What the standard executor does not give:

- workers are daemon threads, so a call abandoned on timeout or cancellation (a thread cannot be
  stopped) never keeps the process from exiting — ``ThreadPoolExecutor`` joins its workers at
  exit and would hang there;
- the pool is rebuilt after ``fork`` (an inherited executor believes in threads the child does not
  have, and its jobs never run);
- workers start on demand up to ``MAX_WORKERS`` (jobs beyond that wait in the queue, like anyio's
  default limiter of 40) and retire after ``IDLE_S`` without work;
- each job runs in the caller's ``contextvars`` context.

A call whose awaiting task is cancelled is abandoned: the thread finishes and its result is
dropped. Event loops other than asyncio's use anyio.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import TypeVar, cast

import anyio.to_thread

__all__ = ["MAX_WORKERS", "on_asyncio", "run_in_worker"]

MAX_WORKERS = 40
IDLE_S = 10.0

_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[object]", contextvars.Context,
             Callable[[], object]]
_T = TypeVar("_T")


class _Pool:
    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.workers = 0
        self.idle = 0

    def submit(self, job: _Job) -> None:
        with self.lock:
            start = False
            if self.idle > 0:
                self.idle -= 1  # claim an idle worker so two submits do not both count on it
            elif self.workers < MAX_WORKERS:
                self.workers += 1
                start = True
            # else: every worker is busy; the job waits in the queue
        if start:
            threading.Thread(target=self._work, name="toolkeeper-worker", daemon=True).start()
        self.jobs.put(job)

    def _work(self) -> None:
        while True:
            try:
                job = self.jobs.get(timeout=IDLE_S)
            except queue.Empty:
                with self.lock:
                    if self.idle > 0:  # retire, unless a submit has just claimed this worker
                        self.idle -= 1
                        self.workers -= 1
                        return
                continue
            loop, future, context, func = job
            error: BaseException | None = None
            try:
                value = context.run(func)
            except BaseException as exc:  # handed to the awaiting task
                value, error = None, exc
            # Idle before the caller hears back, so its next job finds this worker instead of
            # starting another one.
            with self.lock:
                self.idle += 1
            _deliver(loop, future, value, error)
            del job, future, value, error  # hold no reference while waiting


def _deliver(loop: asyncio.AbstractEventLoop, future: asyncio.Future[object], value: object,
             error: BaseException | None) -> None:
    with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
        loop.call_soon_threadsafe(_settle, future, value, error)


def _settle(future: asyncio.Future[object], value: object, error: BaseException | None) -> None:
    if future.done():  # the caller was cancelled and abandoned the call
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


_pool = _Pool()


def _reset_after_fork() -> None:
    global _pool
    _pool = _Pool()


os.register_at_fork(after_in_child=_reset_after_fork)


def on_asyncio() -> bool:
    """Whether the caller runs in an asyncio task (not trio, not plain sync code)."""
    try:
        return asyncio.current_task() is not None
    except RuntimeError:
        return False


async def run_in_worker(func: Callable[[], _T]) -> _T:
    """Run ``func()`` in a worker thread and return (or raise) what it did."""
    if not on_asyncio():
        return await anyio.to_thread.run_sync(func, abandon_on_cancel=True)
    loop = asyncio.get_running_loop()
    future: asyncio.Future[object] = loop.create_future()
    _pool.submit((loop, future, contextvars.copy_context(), func))
    return cast(_T, await future)  # what func returned
