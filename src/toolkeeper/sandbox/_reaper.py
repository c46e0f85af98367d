"""The launcher of the Landlock fallback: a child subreaper around one confined command.

Without a pid namespace, killing a process group misses ``setsid`` children (measured: a
``setsid`` child outlives the group kill). This launcher marks itself a child subreaper, so
every orphan the command leaves is re-parented to it; when the command ends, or the host asks
with SIGTERM (a timeout, an output flood), or the host dies, it kills everything it has adopted
until nothing is left, then exits with the command's status.

Only the command is confined: the launcher forks, and the child drops root (when the host runs
as root), sets ``no_new_privs``, enters the Landlock domain the host built (``RULESET_FD``) —
whose signal scoping (ABI ≥ 6) keeps the command from signalling the launcher — installs the
seccomp program (read from ``BPF_FD``) and execs. A root launcher cannot be signalled by the
unprivileged command at all.

Run by path with the host's interpreter, isolated and without ``site`` (standard library only)::

    python -I -S _reaper.py UID RULESET_FD BPF_FD -- COMMAND [ARG...]

``UID`` is ``-1`` to keep the current uid; ``BPF_FD`` is ``-1`` without a seccomp program.
"""


import ctypes
import os
import sys
import time

TYPE_CHECKING = False  # ``typing`` would cost milliseconds of start-up
if TYPE_CHECKING:
    import signal
else:  # the C module: ``signal`` would import ``enum`` (milliseconds)
    import _signal as signal

PR_SET_PDEATHSIG = 1
PR_SET_SECCOMP = 22
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2
SYS_LANDLOCK_RESTRICT_SELF = 446
KILL_ALL_LIMIT_S = 60.0  # a guard only: the kernel may take seconds to end a fork bomb

_libc = ctypes.CDLL(None, use_errno=True)


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


class _Stop(Exception):
    """The host asked the launcher to end the command (SIGTERM)."""


def _check(result: int, what: str) -> None:
    if result != 0:
        raise OSError(ctypes.get_errno(), f"{what} failed")


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def confine(uid: int, ruleset_fd: int, bpf: bytes) -> None:
    """Enter the confinement (in the child, just before exec)."""
    if uid >= 0 and os.geteuid() == 0:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")
    _check(_libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset_fd, 0), "landlock_restrict_self")
    os.close(ruleset_fd)
    if bpf:
        filters = (_SockFilter * (len(bpf) // 8)).from_buffer_copy(bpf)
        program = _SockFprog(len(filters), ctypes.cast(filters, ctypes.POINTER(_SockFilter)))
        _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0),
               "installing the seccomp filter")


def _resolve(program: str) -> str:
    """The program's path, found on ``PATH`` before confinement (no imports after it)."""
    if "/" in program:
        return program
    for directory in os.environ.get("PATH", "/usr/bin:/bin").split(":"):
        candidate = os.path.join(directory or ".", program)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return program


def _children() -> list[int]:
    """This process's children: from ``/proc/PID/task/PID/children`` where the kernel has it,
    else by scanning every ``/proc/N/stat`` for this parent."""
    pid = os.getpid()
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as listing:
            return [int(child) for child in listing.read().split()]
    except OSError:
        pass
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if parent == pid:
                found.append(int(entry))
    return found


def kill_all() -> None:
    """Kill and reap every child until none is left; the children of a killed process are
    re-parented here (subreaper) and killed on the next round."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    deadline = time.monotonic() + KILL_ALL_LIMIT_S
    while time.monotonic() < deadline:
        for child in _children():
            try:  # noqa: SIM105 - contextlib would cost milliseconds of start-up
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
        reaped = 1
        while reaped:  # every child already dead, not one per round
            try:
                reaped, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
        time.sleep(0.001)


def _stop(signum: int, frame: object) -> None:
    raise _Stop


def main(argv: list[str]) -> int:
    try:
        split = argv.index("--")
        uid, ruleset_fd, bpf_fd = (int(value) for value in argv[:split])
        command = argv[split + 1:]
    except ValueError:
        print("usage: _reaper.py UID RULESET_FD BPF_FD -- COMMAND [ARG...]", file=sys.stderr)
        return 2
    if not command:
        print("_reaper.py: no command given", file=sys.stderr)
        return 2
    bpf = _read_all(bpf_fd) if bpf_fd >= 0 else b""
    signal.signal(signal.SIGTERM, _stop)
    _check(_libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "PR_SET_CHILD_SUBREAPER")
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0), "PR_SET_PDEATHSIG")
    if os.getppid() == 1:
        return 137  # the host is already gone
    status: int | None = None
    program, environ = _resolve(command[0]), dict(os.environ)
    failure = f"sandbox: cannot run {command[0]!r}: ".encode()
    try:
        pid = os.fork()
        if pid == 0:
            # Once confined, the standard library may be out of reach: nothing may import.
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                confine(uid, ruleset_fd, bpf)
                os.execve(program, command, environ)
            except BaseException as exc:  # the child must never return
                os.write(2, failure + str(exc).encode() + b"\n")
            os._exit(127)
        os.close(ruleset_fd)
        _, status = os.waitpid(pid, 0)
    except _Stop:
        pass
    finally:
        kill_all()
    if status is None:
        return 137
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)  # report the command's death the way it happened
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
