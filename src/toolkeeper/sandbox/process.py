"""Starting a command and collecting what it does: output read incrementally under a cap, one
absolute deadline, and the whole process group (or pid namespace) gone before the call returns."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from .base import SYSTEM_PATH, Limits, SandboxResult
from .cgroups import CallGroup
from .limits import Gate, call_group, drop_uid, exec_helpers, gated, limited, rlimits_for
from .spare import Spare, spares

__all__ = ["KILL_GRACE_S", "collect", "command_env", "kill_group", "run_helper", "run_process"]

KILL_GRACE_S = 3.0
# How long a call waits, at most, for everything it started to be gone once it is killed. The
# kernel tears a fork bomb down asynchronously, and on a loaded machine that takes seconds; the
# call does not return before it is done, so this bound is only a guard against a process the
# kernel cannot kill (one stuck in uninterruptible sleep).
GONE_BOUND_S = 60.0

log = logging.getLogger("toolkeeper.sandbox")


def run_helper(argv: Sequence[str], *, cwd: str, env: Mapping[str, str], timeout_s: float,
               output_cap: int, pass_fds: Sequence[int] = ()) -> SandboxResult:
    """A trusted host program (ripgrep, grep) over a workspace a command may have filled:
    its output is read incrementally under ``output_cap`` and the whole process group is
    killed at the cap or the deadline, so what it prints never costs more host memory than
    the cap. It keeps the host's uid (it reads the workspace as the file tools do). Output
    is decoded with ``surrogateescape``, so file names round-trip to ``os.fsencode``."""
    started = time.monotonic()
    proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=cwd, env=dict(env), close_fds=True,
                            pass_fds=tuple(pass_fds), start_new_session=True)
    out, err, truncated, timed_out = collect(proc, started + timeout_s, output_cap)
    return SandboxResult(exit_code=proc.returncode, stdout=out.decode("utf-8", "surrogateescape"),
                         stderr=err.decode("utf-8", "replace"), truncated=truncated,
                         timed_out=timed_out, duration_s=time.monotonic() - started)


def command_env(workspace: Path, env: Mapping[str, str] | None) -> dict[str, str]:
    return {"PATH": SYSTEM_PATH, "HOME": str(workspace), "LANG": "C.UTF-8", **(env or {})}


def run_process(argv: list[str], *, cwd: Path | None, env: dict[str, str], timeout_s: float,
         output_cap: int, limits: Limits | None, pass_fds: Sequence[int] = (),
         close_after_start: Sequence[int] = (), drop_root: bool = True,
         info_fd: int | None = None, nproc_inside: bool = False,
         stop: Callable[[subprocess.Popen[bytes]], None] | None = None,
         cancel: threading.Event | None = None, spare: bool = False) -> SandboxResult:
    """Start ``argv`` in a new session with the limits (and the call's cgroup, if any), read
    its output under the cap until it ends, the deadline passes or ``cancel`` is set, and say
    what happened. ``nproc_inside``: ``argv`` sets its own process limit (a sandbox that counts
    its processes in its own user namespace), so none is set on the launcher. ``spare``: take
    a launcher already held in its own call group (``spare.SpareGates``) when one is ready."""
    limits = limits or Limits(cpu_s=max(1, int(timeout_s) + 1))
    started = time.monotonic()
    taken = _spare_for(limits, env) if spare else None
    proc: subprocess.Popen[bytes] | None = None
    if taken is not None:
        try:
            proc = taken.hand(argv, env=env, cwd=cwd, fds=pass_fds, uid=drop_uid(drop_root),
                              rlimits=rlimits_for(limits, taken.group, nproc=not nproc_inside))
        except OSError as exc:  # nothing was sent: the gate ran nothing; today's path
            log.warning("a spare launch gate could not be used (%s); starting one", exc)
            taken.discard()
            taken = None
        except BaseException:
            taken.discard()
            raise
        else:
            for fd in close_after_start:
                os.close(fd)
    with _spare_group(taken) if taken is not None else call_group(limits) as group:
        if proc is None:
            proc = _start(argv, limits, group, drop_root=drop_root, nproc=not nproc_inside,
                          cwd=cwd, env=env, pass_fds=pass_fds,
                          close_after_start=close_after_start)
        namespace = _Namespace(proc.pid)
        out, err, truncated, timed_out = collect(proc, started + timeout_s, output_cap,
                                                  info_fd=info_fd, namespace=namespace,
                                                  stop=stop or kill_group, cancel=cancel)
        oom = group is not None and group.oom_killed()
    stderr = err.decode("utf-8", "replace")
    failed = "" if info_fd is None or timed_out else _start_error(proc.returncode, stderr,
                                                                  namespace.started)
    return SandboxResult(exit_code=proc.returncode, stdout=out.decode("utf-8", "replace"),
                         stderr=stderr, truncated=truncated, timed_out=timed_out,
                         duration_s=time.monotonic() - started, oom_killed=oom,
                         start_error=failed)


def _spare_for(limits: Limits, env: dict[str, str]) -> Spare | None:
    """A spare launcher for this run when the helpers are installed and one is ready."""
    if exec_helpers() is None:
        return None
    return spares.take(limits, env)


@contextlib.contextmanager
def _spare_group(taken: Spare) -> Iterator[CallGroup | None]:
    """The taken spare's group for the run; killed and removed after it, as a call group."""
    try:
        yield taken.group
    finally:
        taken.discard()


def _start(argv: list[str], limits: Limits, group: CallGroup | None, *, drop_root: bool,
           nproc: bool, cwd: Path | None, env: dict[str, str], pass_fds: Sequence[int],
           close_after_start: Sequence[int]) -> subprocess.Popen[bytes]:
    """Start ``argv`` behind its limits: held at a gate until the host has put them on
    (``gated``), or, without the helpers, with a ``preexec_fn`` that sets them."""
    held = gated(argv, limits, group, drop_root=drop_root, nproc=nproc)
    gate: Gate | None = None
    preexec = None
    if held is None:
        argv, preexec = limited(argv, limits, group, drop_root=drop_root, nproc=nproc)
    else:
        argv, gate = held
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL if gate is None else gate.stdin,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env, close_fds=True,
            pass_fds=tuple(pass_fds), start_new_session=True, preexec_fn=preexec)
    except BaseException:
        if gate is not None:
            gate.abandon()
        raise
    finally:
        for fd in close_after_start:
            os.close(fd)
    if gate is not None:
        gate.release(proc.pid)
    return proc


def _start_error(code: int | None, stderr: str, started: bool) -> str:
    """Why bubblewrap never ran the command ("" when it did): it exited without starting the
    sandbox's init (a namespace it could not create), or failed setting the sandbox up before
    the command's exec (its own ``bwrap: …`` line and exit code 1)."""
    if code == 0 or code is None:
        return ""
    first = stderr.lstrip().split("\n", 1)[0].strip()
    if started and not (code == 1 and first.startswith("bwrap: ")):
        return ""
    return first[:300] or f"the sandbox launcher exited with code {code} before the command ran"


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def wait_group_gone(group: int, timeout_s: float) -> None:
    """Kill ``group`` until no member is left (a fork bomb may fork while being killed)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            return
        time.sleep(0.005)


class _Namespace:
    """The sandbox's pid-namespace init, read from bwrap's ``--info-fd``. Killing bwrap kills
    the namespace, but the kernel tears it down asynchronously (a fork bomb takes a while);
    the init's pidfd becomes readable only once every process in the namespace is gone."""

    def __init__(self, launcher: int) -> None:
        self.launcher = launcher
        self.info = bytearray()
        self.pidfd: int | None = None
        self.started = False  # bwrap said it started the sandbox's init

    def feed(self, chunk: bytes) -> None:
        """Take more of bwrap's info; open the init's pidfd as soon as its pid is known, while
        bwrap (its parent, which has not reaped it) still runs."""
        self.info += chunk
        if self.pidfd is not None:
            return
        try:
            pid = int(json.loads(self.info)["child-pid"])
        except (ValueError, KeyError, TypeError):
            return  # not complete yet
        self.started = True
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            return  # already gone
        try:  # the pid is only ours if bwrap is still its parent
            stat = Path(f"/proc/{pid}/stat").read_text()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            parent = -1
        if parent != self.launcher:
            os.close(pidfd)
            return
        self.pidfd = pidfd

    def wait_gone(self, timeout_s: float) -> None:
        if self.pidfd is None:
            return
        try:
            poller = select.poll()
            poller.register(self.pidfd, select.POLLIN)
            poller.poll(timeout_s * 1000)
        finally:
            os.close(self.pidfd)
            self.pidfd = None


def _drain(info_fd: int, namespace: _Namespace) -> None:
    """Read what bwrap has written to its info pipe and not been read yet (the loop may end on
    the deadline before it did), so the namespace's init can be waited for."""
    with contextlib.suppress(BlockingIOError, OSError):
        while chunk := os.read(info_fd, 65536):
            namespace.feed(chunk)


def collect(proc: subprocess.Popen[bytes], deadline: float, cap: int, *,
             info_fd: int | None = None, namespace: _Namespace | None = None,
             stop: Callable[[subprocess.Popen[bytes]], None] = kill_group,
             cancel: threading.Event | None = None) -> tuple[bytes, bytes, bool, bool]:
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    buffers = {out_fd: bytearray(), err_fd: bytearray()}
    selector = selectors.DefaultSelector()
    for stream in (proc.stdout, proc.stderr):
        os.set_blocking(stream.fileno(), False)
        selector.register(stream, selectors.EVENT_READ)
    namespace = namespace or _Namespace(proc.pid)
    if info_fd is not None:
        os.set_blocking(info_fd, False)
        selector.register(info_fd, selectors.EVENT_READ)
    truncated = timed_out = False
    exited_at: float | None = None
    try:
        while selector.get_map():
            now = time.monotonic()
            remaining = deadline - now
            if remaining <= 0 or (cancel is not None and cancel.is_set()):
                timed_out = True
                break
            if proc.poll() is not None:
                # The command is done; a background child may still hold the pipes open.
                exited_at = exited_at or now
                if now - exited_at > 0.2:
                    break
            for key, _ in selector.select(timeout=min(remaining, 0.1)):
                chunk = os.read(key.fd, 65536)
                if key.fd == info_fd:
                    if chunk:
                        namespace.feed(chunk)
                    else:
                        selector.unregister(key.fileobj)
                    continue
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                buffers[key.fd] += chunk
                if sum(len(b) for b in buffers.values()) > cap:
                    truncated = True
                    break
            if truncated:
                break
    finally:
        selector.close()
        if info_fd is not None:  # the init's pid, if bwrap wrote it while the loop was done
            _drain(info_fd, namespace)
        if truncated or timed_out or exited_at is not None:
            stop(proc)  # the whole group: nothing the command started outlives the call
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()) if not timed_out else 5)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            proc.wait(timeout=5)
        if truncated or timed_out or exited_at is not None:
            wait_group_gone(proc.pid, GONE_BOUND_S)
        namespace.wait_gone(GONE_BOUND_S)
        proc.stdout.close()
        proc.stderr.close()
    out = bytes(buffers[out_fd][:cap])
    err = bytes(buffers[err_fd][: max(0, cap - len(out))])
    return out, err, truncated, timed_out
