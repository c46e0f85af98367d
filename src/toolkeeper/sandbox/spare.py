"""A spare launch gate: the next call's cgroup made and its launcher moved in ahead of need.

Moving a process into a cgroup waits for an RCU grace period when no move happened in the
last few milliseconds (5-21 ms measured on a quiet machine, the largest step of a code-mode
cold start that toolkeeper controls). A spare pays it while nobody waits: a small host
program (``python3 -I -S``, the gate) is started in a new session, moved into a fresh call
group with the call's memory and process limits, and held reading a socket only the host
holds. A run that takes it sends its command line, environment, working directory and fds
(``SCM_RIGHTS``); the host sets the rlimits by pid first, the gate sets the open-files
limit once the fds are in place, then ``exec``s the command — nothing of the command runs
before every limit is on. A spare serves one run and is never reused; one that failed to
start is never used (the run takes today's path); one unused for ``IDLE_S`` is killed and
its group removed, as are all at ``close`` and at exit. The gate exits without running
anything if the host's end closes (the host died), and by itself after ``IDLE_S`` twice.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import resource
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from .base import Limits
from .cgroups import CallGroup
from .cgroups import probe as cgroup_probe

__all__ = ["IDLE_S", "Spare", "SpareGates", "spares"]

log = logging.getLogger("toolkeeper.sandbox")

IDLE_S = 60.0
"""Seconds a spare waits for a run, at most, before it is killed and its group removed."""

GATE_PYTHON = "/usr/bin/python3"
"""The interpreter the gate runs in: the system's, started isolated and without ``site``."""

# The gate: wait for the host's one message (none: exit, running nothing), put the fds at the
# numbers the command line names, set the open-files limit, change directory, drop root when
# told (what `setpriv --reuid=U --regid=U --clear-groups` does, without its exec: no groups,
# then the real, effective and saved gid, then the uid - the kernel clears the capabilities as
# the last root uid goes - each checked before the exec), exec. Fields are NUL-separated: "go",
# the uid to become ("" keeps the host's), the program's path (argv[0] found on the command's
# PATH by the host, as execvp would), the open-files limit, the working directory, the count of
# fds, their numbers, the count of argv entries, argv, then the environment's KEY=VALUE entries.
_GATE = r"""
import os, sys, _socket, resource
s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET, 0, int(sys.argv[1]))
s.settimeout(float(sys.argv[2]))
try:
    data, anc, flags, _ = s.recvmsg(1 << 20, _socket.CMSG_SPACE(4 * 253))
except OSError:
    os._exit(126)
s.close()
got = []
for level, kind, raw in anc:
    if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
        got += [int.from_bytes(raw[i:i + 4], sys.byteorder) for i in range(0, len(raw) - 3, 4)]
f = data.split(b"\0")
if not data or flags & (_socket.MSG_TRUNC | _socket.MSG_CTRUNC) or f[0] != b"go":
    os._exit(126)
try:
    uid, program, nofile, cwd, n = f[1], f[2], int(f[3]), f[4], int(f[5])
    targets = [int(x) for x in f[6:6 + n]]
    m = int(f[6 + n])
    argv = f[7 + n:7 + n + m]
    env = dict(e.split(b"=", 1) for e in f[7 + n + m:] if e)
    if len(got) != n or not argv:
        os._exit(126)
    keep = []
    for fd in got:
        while fd in targets or fd < 3:
            fd = os.dup(fd)
        keep.append(fd)
    for fd, target in zip(keep, targets):
        os.dup2(fd, target)
    for fd in set(got) | set(keep):
        if fd not in targets and fd > 2:
            os.close(fd)
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    if cwd:
        os.chdir(cwd)
    if uid:
        uid = int(uid)
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        if (os.getresuid() != (uid, uid, uid) or os.getresgid() != (uid, uid, uid)
                or os.getgroups()):
            os._exit(126)
    os.execve(program, argv, env)
except BaseException as exc:
    os.write(2, b"toolkeeper: the command was not started: " + repr(exc).encode() + b"\n")
os._exit(126)
"""


class Spare:
    """One gate held in its own call group, for exactly one run."""

    def __init__(self, limits: Limits, env: dict[str, str]) -> None:
        self.key = (limits.memory, limits.processes)
        self.env = dict(env)
        self.created = time.monotonic()
        support = cgroup_probe()
        self.group: CallGroup | None = CallGroup(support, memory_bytes=limits.memory,
                                                 pids=limits.processes)
        self.group.__enter__()
        self.dirs_seen = list(self.group.dirs)
        self.pid = -1
        self.proc: subprocess.Popen[bytes] | None = None
        self.host: socket.socket | None = None
        try:
            self.host, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                self.proc = subprocess.Popen(
                    [GATE_PYTHON, "-I", "-S", "-c", _GATE, str(child.fileno()),
                     str(2 * IDLE_S)],
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    env=self.env, close_fds=True, pass_fds=(child.fileno(),),
                    start_new_session=True)
            finally:
                child.close()
            self.pid = self.proc.pid
            self.group.admit(self.proc.pid)  # the grace period, paid here
        except BaseException:
            self.discard()
            raise

    def hand(self, argv: Sequence[str], *, env: dict[str, str], cwd: Path | None,
             fds: Sequence[int], rlimits: list[tuple[int, tuple[int, int]]],
             uid: int | None = None) -> subprocess.Popen[bytes]:
        """Set the rlimits on the gate and send it the command: it ``exec``s it, as ``uid``
        (with that gid and no supplementary groups) when given. Raises ``OSError`` (the spare is
        then discarded) if any step fails before the send."""
        assert self.proc is not None and self.host is not None
        program = argv[0] if os.sep in argv[0] else shutil.which(
            argv[0], path=env.get("PATH", os.defpath))
        if program is None:  # found the way execvp would (the gate's exec does not search)
            raise OSError(f"{argv[0]!r} is not on the command's PATH")
        nofile = None
        for which, value in rlimits:
            if which == resource.RLIMIT_NOFILE:
                nofile = value[0]  # set by the gate once the fds are at their numbers
                continue
            resource.prlimit(self.proc.pid, which, value)
        if nofile is None:
            nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        fields = [b"go", b"" if uid is None else str(uid).encode(), os.fsencode(program),
                  str(nofile).encode(),
                  os.fsencode(cwd) if cwd else b"",
                  str(len(fds)).encode(), *(str(fd).encode() for fd in fds),
                  str(len(argv)).encode(), *(os.fsencode(a) for a in argv),
                  *(os.fsencode(f"{k}={v}") for k, v in env.items())]
        if any(b"\0" in field for field in fields):
            raise OSError("a NUL byte in the command line or environment")
        self.host.sendmsg([b"\0".join(fields)],
                          [(socket.SOL_SOCKET, socket.SCM_RIGHTS, bytes(
                              b"".join(fd.to_bytes(4, sys.byteorder) for fd in fds)))]
                          if fds else [])
        self.host.close()
        self.host = None
        return self.proc

    def discard(self) -> None:
        """Kill the gate (it has run nothing) and remove its group."""
        if self.host is not None:
            with contextlib.suppress(OSError):
                self.host.close()
            self.host = None
        if self.proc is not None:
            if self.proc.poll() is None:  # never killed by pid once reaped (reusable)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, 9)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
            for stream in (self.proc.stdout, self.proc.stderr):
                if stream is not None:
                    stream.close()
            self.proc = None
        if self.group is not None:
            self.group.__exit__(None, None, None)
            self.group = None


class SpareGates:
    """At most one spare, prepared in the background at first use and after each take."""

    def __init__(self, idle_s: float = IDLE_S) -> None:
        self.idle_s = idle_s
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # notified when a preparation ends
        self._spare: Spare | None = None
        self._preparing = False
        self._closed = False
        self._timer: threading.Timer | None = None
        self.failures = 0
        self.served = 0

    def take(self, limits: Limits, env: dict[str, str]) -> Spare | None:
        """The spare, if one is ready for these limits and this environment (it is then no
        longer this keeper's); a new one is prepared in the background either way."""
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is not None and (spare.key != (limits.memory, limits.processes)
                                  or spare.env != env
                                  or time.monotonic() - spare.created > self.idle_s
                                  or spare.proc is None or spare.proc.poll() is not None):
            spare.discard()
            spare = None
        self.prepare(limits, env)
        if spare is not None:
            with self._lock:
                self.served += 1
        return spare

    def prepare(self, limits: Limits, env: dict[str, str]) -> None:
        """Start preparing a spare in the background unless one is ready or on its way."""
        if not cgroup_probe().available:
            return
        with self._lock:
            if self._closed or self._preparing or self._spare is not None:
                return
            self._preparing = True
        threading.Thread(target=self._prepare, args=(limits, dict(env)),
                         name="toolkeeper-spare-gate", daemon=True).start()

    def _prepare(self, limits: Limits, env: dict[str, str]) -> None:
        spare: Spare | None = None
        try:
            spare = Spare(limits, env)
        except Exception as exc:  # never used: runs take today's path
            log.debug("no spare launch gate (%s)", exc)
        with self._lock:
            if spare is None:
                self.failures += 1
            elif not self._closed:
                self._spare, spare = spare, None
                self._arm_expiry()
            if spare is None:
                self._preparing = False
                self._changed.notify_all()
                return
        spare.discard()  # prepared after close: discarded before anyone hears it ended, so
        with self._lock:  # a close at exit never returns with its group still there
            self._preparing = False
            self._changed.notify_all()

    def _arm_expiry(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = threading.Timer(self.idle_s, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def _expire(self) -> None:
        with self._lock:
            spare = self._spare
            if spare is None or time.monotonic() - spare.created < self.idle_s * 0.99:
                return
            self._spare = None
        spare.discard()

    def wait_ready(self, timeout_s: float) -> bool:
        """Whether a spare is ready, waiting at most ``timeout_s`` for one being prepared."""
        with self._changed:
            self._changed.wait_for(lambda: not self._preparing, timeout=timeout_s)
            return self._spare is not None

    def close(self) -> None:
        """Kill the spare and remove its group; none is prepared after."""
        with self._lock:
            self._closed = True
            spare, self._spare = self._spare, None
            if self._timer is not None:
                self._timer.cancel()
        if spare is not None:
            spare.discard()
        with self._changed:  # one on its way is discarded when it ends
            self._changed.wait_for(lambda: not self._preparing, timeout=10)

    def reopen(self) -> None:
        """Let spares be prepared again after ``close``. The process's keeper is closed at
        exit; a host that closes it to drop its spare (a test that counts spares starts from
        none) reopens it here rather than replacing the module's ``spares``, which callers
        have already imported by name."""
        with self._lock:
            self._closed = False


spares = SpareGates()
"""The process's spare gates, used by runs that ask for one (``RunOptions.spare_gate``)."""
atexit.register(spares.close)
