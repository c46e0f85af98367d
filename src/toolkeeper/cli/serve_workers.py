"""``toolkeeper serve --workers N``: N processes serving on one port, and the process the
operator started supervising them.

- **the port**: the supervisor binds it first *without* ``SO_REUSEPORT`` (a port another
  server holds, even another ``serve --workers``, is refused in one line, never shared), then
  sets the option and holds it, bound but not listening (it takes no connection). Each worker
  binds a socket of its own to it with the option set and listens; Linux spreads new
  connections over the workers' sockets.
- **the start**: worker 1 starts alone (it makes the state folder's tokens and the store's
  tables on a fresh machine, and a start that fails fails once, in its one line), then the
  others together. Once all serve, the supervisor prints worker 1's start lines, once, and
  writes the server file.
- **the state**: each worker opens the same store — the SQLite file in WAL mode (every
  connection waits for another's write) or the PostgreSQL database — so approvals, the audit
  log, tokens, page sessions, pins and rules are one; the rate limit is counted there too.
- **the stop**: SIGTERM or SIGINT to the supervisor stops every worker with SIGTERM (each is in
  a process group of its own: Ctrl-C reaches them once, through the supervisor). A worker that
  serves, or has taken the signals while starting, stops as one process does, in-flight calls
  answered; one still starting its interpreter (before it can take a signal) is ended silently
  by SIGTERM's default action, where SIGINT would raise ``KeyboardInterrupt`` in the middle of
  Python's own start and print its traceback. No worker is started once the stop has come; a
  worker still running ``DEADLINE_S`` later is killed. A worker that ends by itself is never
  restarted silently: one line says which and how, the others are stopped, and the supervisor
  exits with status 1 for its own supervisor (systemd, a container runtime) to act on. A
  supervisor that dies (even by SIGKILL) closes the workers' stdin, and they stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field

import typer

from .lifecycle import DEADLINE_S, Lifecycle
from .serve_listen import bound_socket, forget_server, print_lines, record_server, report_lines, server_url
from .serve_settings import ServeSettings

__all__ = ["hold_port", "supervise"]

WORKER_MODULE = "toolkeeper.cli.serve_worker"
GRACE_S = 0.5
"""How long after the workers' own deadline the supervisor waits before it kills one."""


def supervise(settings: ServeSettings, life: Lifecycle) -> None:
    """Serve ``settings`` from ``settings.flags.workers`` processes until stopped.

    Raises:
        typer.Exit: the port cannot be held, or a worker ended (one line said why).
    """
    host = settings.flags.host
    held = hold_port(host, settings.flags.port)
    try:
        url = server_url(held, host)
        flags = settings.flags.model_copy(update={"port": held.getsockname()[1]})
        status = asyncio.run(Crew(settings.model_copy(update={"flags": flags}), life).run(url))
    finally:
        held.close()
    if status:
        raise typer.Exit(status)


def hold_port(host: str, port: int) -> socket.socket:
    """The workers' port, bound by the supervisor and not listening: refused in one line when
    anything else holds it; shared (``SO_REUSEPORT``) only from then on."""
    sock = bound_socket(host, port)  # alone first: a port anyone holds is refused
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    return sock


@dataclass
class Worker:
    """One worker process, and the pipe its start lines come through."""

    number: int
    proc: asyncio.subprocess.Process
    ready: asyncio.Task[bytes]

    def says(self) -> str:
        return f"worker {self.number} (pid {self.proc.pid})"


@dataclass
class Crew:
    """The workers of one ``serve --workers``, from their start to their stop."""

    settings: ServeSettings
    life: Lifecycle
    workers: list[Worker] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self, url: str) -> int:
        """Start, serve until a signal or a worker's end, stop: the exit status."""
        self.life.serving(asyncio.get_running_loop(), self.stop.set)
        self.life.deadline_s = DEADLINE_S + 2 * GRACE_S  # after the workers' own deadline
        self.life.at_once = self.kill
        try:
            return await self._serve(url)
        finally:
            self.life.at("stopping the workers")
            await self.halt()
            forget_server(self.settings.state_dir)

    async def _serve(self, url: str) -> int:
        first = await self._start(1)
        lines = await self._ready(first)
        if lines is None:
            return await self._ended(first, starting=True)
        rest = []
        for number in range(2, self.settings.flags.workers + 1):
            if self.stop.is_set():  # no worker is started once the stop has come
                return 0
            rest.append(await self._start(number))
        for worker in rest:
            if await self._ready(worker) is None:
                return await self._ended(worker, starting=True)
        pids = ", ".join(str(w.proc.pid) for w in self.workers)
        print_lines([*lines, f"workers: {len(self.workers)} processes on port "
                     f"{self.settings.flags.port} (pids {pids}); one that ends stops them "
                     "all; large results are sent whole (no artifact store)"])
        record_server(self.settings.state_dir, url)
        waits = {asyncio.ensure_future(w.proc.wait()): w for w in self.workers}
        stopped = asyncio.ensure_future(self.stop.wait())
        done, _ = await asyncio.wait([stopped, *waits], return_when=asyncio.FIRST_COMPLETED)
        ended = [waits[task] for task in done if task in waits]
        stopped.cancel()
        return 0 if self.stop.is_set() or not ended else await self._ended(ended[0],
                                                                            starting=False)

    async def _start(self, number: int) -> Worker:
        read, write = os.pipe()
        settings = self.settings.model_copy(update={"worker": number})
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-P", "-m", WORKER_MODULE, stdin=subprocess.PIPE,
                pass_fds=(write,), process_group=0)
        except BaseException:
            os.close(read)
            raise
        finally:
            os.close(write)  # the worker's now: its end is the worker's end
        worker = Worker(number, proc, asyncio.ensure_future(_read_all(read)))
        self.workers.append(worker)  # stopped (or killed at once) from here on, handed off or not
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # it ended: _ready says
            proc.stdin.write(pickle.dumps((sys.path, write, pickle.dumps(settings))))
            await proc.stdin.drain()  # the pipe stays open: its end tells the worker to stop
        return worker

    async def _ready(self, worker: Worker) -> list[str] | None:
        """The worker's start lines once it serves; ``None`` if it ended or a stop came."""
        stopped = asyncio.ensure_future(self.stop.wait())
        await asyncio.wait([worker.ready, stopped], return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        said = worker.ready.result() if worker.ready.done() else b""
        if not said or self.stop.is_set():
            return None
        lines: list[str] = json.loads(said)
        return lines

    async def _ended(self, worker: Worker, *, starting: bool) -> int:
        """A worker ended by itself (not told to): say so unless it said why itself."""
        if self.stop.is_set():
            return 0
        try:  # its pipe has closed: the process ends
            code: int | None = await asyncio.wait_for(worker.proc.wait(), DEADLINE_S)
        except TimeoutError:
            code = None
        if starting and code is not None and code > 0:
            return code  # a start that failed: the worker said why, in its one line
        how = f"exit status {code}" if code is None or code >= 0 else \
            f"killed by {signal.Signals(-code).name}"
        report_lines([f"{worker.says()} ended ({how}) while "
                      f"{'starting' if starting else 'serving'}; stopping the other workers "
                      "(a supervisor restarts serve: systemd Restart=, a container's restart "
                      "policy)"])
        return 1

    async def halt(self) -> None:
        """Stop every worker still running, and wait for them; kill one still running after its
        own deadline. The stop is SIGTERM whichever signal the supervisor received: a worker
        that has its handlers stops the same on either, and one still starting its interpreter
        ends silently on SIGTERM (SIGINT would print ``KeyboardInterrupt``'s traceback from
        inside Python's start)."""
        living = [w for w in self.workers if w.proc.returncode is None]
        for worker in living:
            _send(worker.proc, signal.SIGTERM)
        waiting = [asyncio.ensure_future(w.proc.wait()) for w in living]
        if waiting:
            _, late = await asyncio.wait(waiting, timeout=DEADLINE_S + GRACE_S)
            if late:
                report_lines([f"{len(late)} worker(s) still running {DEADLINE_S + GRACE_S:g} s "
                              "after the stop: killed"])
                self.kill()
                await asyncio.wait(late)
        for worker in self.workers:
            worker.ready.cancel()

    def kill(self) -> None:
        """Every worker still running ends now (SIGKILL)."""
        for worker in self.workers:
            if worker.proc.returncode is None:
                _send(worker.proc, signal.SIGKILL)


def _send(proc: asyncio.subprocess.Process, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # ended meanwhile
        proc.send_signal(signum)


async def _read_all(fd: int) -> bytes:
    """Everything written to the pipe ``fd`` until its writer closes it (or ends)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                                os.fdopen(fd, "rb", buffering=0))
    try:
        return await reader.read()
    finally:
        transport.close()
