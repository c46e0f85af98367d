"""The worker-thread hand-off for sync tools: results, errors, context, limits, cancellation."""

from __future__ import annotations

import asyncio
import contextvars
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from toolkeeper.tools import threads
from toolkeeper.tools.threads import run_in_worker

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


async def test_values_and_errors_come_back_from_another_thread() -> None:
    assert await run_in_worker(threading.get_ident) != threading.get_ident()

    def fail() -> None:
        raise KeyError("missing")

    with pytest.raises(KeyError, match="missing"):
        await run_in_worker(fail)


async def test_the_callers_context_variables_are_visible() -> None:
    REQUEST_ID.set("req-7")
    assert await run_in_worker(REQUEST_ID.get) == "req-7"


async def test_blocking_jobs_run_side_by_side() -> None:
    barrier = threading.Barrier(8, timeout=5)  # breaks unless all eight run at once
    results = await asyncio.gather(*(run_in_worker(barrier.wait) for _ in range(8)))
    assert sorted(results) == list(range(8))


async def test_jobs_beyond_the_worker_limit_wait_their_turn(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    monkeypatch.setattr(threads, "MAX_WORKERS", 3)
    monkeypatch.setattr(threads, "_pool", threads._Pool())
    running, peak = 0, 0
    lock = threading.Lock()

    def job() -> int:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.02)
        with lock:
            running -= 1
        return 1

    assert sum(await asyncio.gather(*(run_in_worker(job) for _ in range(12)))) == 12
    assert peak == 3 and threads._pool.workers == 3


async def test_idle_workers_retire(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threads, "IDLE_S", 0.05)
    monkeypatch.setattr(threads, "_pool", threads._Pool())
    together = threading.Barrier(4, timeout=10)  # four jobs running at once: four workers
    await asyncio.gather(*(run_in_worker(together.wait) for _ in range(4)))
    assert threads._pool.workers == 4
    deadline = time.monotonic() + 5
    while threads._pool.workers and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert threads._pool.workers == 0
    assert await run_in_worker(lambda: "again") == "again"


async def test_a_cancelled_caller_abandons_the_thread_and_its_result() -> None:
    release = threading.Event()
    finished = threading.Event()

    def stuck() -> str:
        release.wait(5)
        finished.set()
        return "late"

    task = asyncio.create_task(run_in_worker(stuck))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()
    assert finished.wait(5)
    await asyncio.sleep(0.05)  # the late result is dropped without an error
    assert await run_in_worker(lambda: "next") == "next"


def test_a_forked_child_gets_a_working_pool() -> None:
    asyncio.run(run_in_worker(lambda: None))  # the parent has started workers
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            ok = asyncio.run(asyncio.wait_for(run_in_worker(lambda: 42), 5)) == 42
        except BaseException:
            ok = False
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_an_abandoned_call_does_not_keep_the_process_from_exiting(tmp_path: Path) -> None:
    script = tmp_path / "stuck.py"
    script.write_text(
        "import asyncio, threading\n"
        "from toolkeeper.tools.threads import run_in_worker\n"
        "async def main():\n"
        "    try:\n"
        "        await asyncio.wait_for(run_in_worker(threading.Event().wait), 0.2)\n"
        "    except asyncio.TimeoutError:\n"
        "        print('abandoned', flush=True)\n"
        "asyncio.run(main())\n")
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=30)
    assert done.stdout.strip() == "abandoned" and done.returncode == 0
    assert time.monotonic() - started < 20
