"""Running programs confined: one bubblewrap sandbox per call (SECURITY.md §4).

All namespaces unshared (no network unless allowed), read-only system binds, the workspace the
only writable bind, a private size-capped ``/tmp``, ``--die-with-parent``, ``--new-session``,
``--cap-drop ALL``, no nested user namespaces. bwrap itself is started with a minimal environment
(bwrap's pid 1 keeps the environment it was started with), ``close_fds``, stdin from
``/dev/null``, a new session, and rlimits; a root host drops to an unprivileged uid first, since
process limits do not bind uid 0. Output is read incrementally under a cap; a timeout or an
output flood kills the whole process group, and with it the pid namespace, so no orphan survives.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import resource
import select
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

from ..errors import UsageError
from .cgroups import CallGroup
from .cgroups import probe as cgroup_probe
from .seccomp_filter import bpf_fd

__all__ = ["BubblewrapSandbox", "LandlockSandbox", "Sandbox", "SandboxReport", "SandboxResult",
           "UnconfinedSandbox", "default_sandbox", "probe", "run_confined", "run_helper",
           "run_landlocked", "run_unconfined"]

log = logging.getLogger("toolkeeper.sandbox")
UNPRIVILEGED_UID = 65534
KILL_GRACE_S = 3.0
CONCURRENT_CALLS = 8
"""Calls whose processes RLIMIT_NPROC leaves room for when per-call pids groups exist."""
_SYSTEM_PATH = "/usr/bin:/bin"


@dataclass(frozen=True, kw_only=True)
class SandboxResult:
    """What a confined command did."""

    exit_code: int | None
    stdout: str
    stderr: str
    truncated: bool
    timed_out: bool
    duration_s: float
    oom_killed: bool = False


@dataclass(frozen=True, kw_only=True)
class SandboxReport:
    """What the start-up probe found."""

    backend: str
    available: bool
    detail: str


@dataclass(frozen=True, kw_only=True)
class Limits:
    cpu_s: int = 30
    file_bytes: int = 64 << 20
    processes: int = 128
    open_files: int = 256
    memory: int = 2 << 30
    """Memory of the whole call: a cgroup limit where the host allows per-call groups, else the
    address space of each process (``RLIMIT_AS``)."""


def _preexec(limits: Limits, group: CallGroup | None = None, *, drop_root: bool = True
             ) -> None:
    # Runs between fork and exec: no imports, no allocation-heavy work.
    if group is not None:
        group.join()  # before the uid drop: joining needs the host's rights
    if drop_root and os.geteuid() == 0:
        os.setgroups([])
        os.setgid(UNPRIVILEGED_UID)
        os.setuid(UNPRIVILEGED_UID)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
    nproc = _nproc(limits, group)
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    if group is None or group.support.memory is None:
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory, limits.memory))


def _nproc(limits: Limits, group: CallGroup | None) -> int:
    """RLIMIT_NPROC counts every process of the sandbox uid, across concurrent calls: with a
    per-call ``pids.max`` bounding each call, it is only a backstop, so one call's fork bomb
    does not starve the others."""
    if group is not None and group.support.pids is not None:
        return limits.processes * CONCURRENT_CALLS
    return limits.processes


@contextlib.contextmanager
def _call_group(limits: Limits) -> Iterator[CallGroup | None]:
    """The call's cgroup when the host allows one (memory and process limits for the whole
    call; whatever is left in it is killed on the way out), else ``None``."""
    support = cgroup_probe()
    if not support.available:
        yield None
        return
    group = CallGroup(support, memory_bytes=limits.memory, pids=limits.processes)
    try:
        group.__enter__()
    except OSError as exc:  # the host took the right away since the probe: per-process limits
        log.warning("no cgroup for this call (%s); limiting address space instead", exc)
        yield None
        return
    try:
        yield group
    finally:
        group.__exit__(None, None, None)


@functools.lru_cache(maxsize=1)
def exec_helpers() -> tuple[str, str, str] | None:
    """util-linux's ``prlimit`` and ``setpriv`` and a POSIX ``sh``, when installed (Debian:
    always)."""
    found = tuple(shutil.which(name, path=_SYSTEM_PATH) for name in ("prlimit", "setpriv", "sh"))
    return found if all(found) else None  # type: ignore[return-value]


# Moves the shell into each cgroup named before "--", then becomes the rest of the command line.
_JOIN_GROUPS = ('for f do [ "$f" = -- ] && break; echo 0 > "$f" || exit 126; shift; done; '
                'shift; exec "$@"')


def _limited(argv: list[str], limits: Limits, group: CallGroup | None, *, drop_root: bool
             ) -> tuple[list[str], Callable[[], None] | None]:
    """``argv`` behind the call's limits: the cgroup join, the rlimits and the uid drop.

    A ``preexec_fn`` would do all three between fork and exec, but it forces CPython to
    ``fork`` the whole host instead of ``vfork``: measured 3.5 ms per call with toolkeeper
    imported and 27 ms with the embedding model loaded (465 MB resident). So the limits are set
    by small programs that exec the next — ``sh`` (join the cgroup), util-linux's ``prlimit`` and
    ``setpriv`` (``--reuid/--regid --clear-groups``; the saved uid follows at exec) — and the
    ``preexec_fn`` is only the fallback where those are not installed.
    """
    helpers = exec_helpers()
    root = drop_root and os.geteuid() == 0
    if helpers is None:
        return argv, functools.partial(_preexec, limits, group, drop_root=drop_root)
    prlimit, setpriv, sh = helpers
    prefix: list[str] = []
    if group is not None:
        prefix += [sh, "-c", _JOIN_GROUPS, "sh", *group.procs_files(), "--"]
    prefix += [prlimit, "--core=0", f"--cpu={limits.cpu_s}:{limits.cpu_s + 1}",
               f"--fsize={limits.file_bytes}", f"--nofile={limits.open_files}",
               f"--nproc={_nproc(limits, group)}"]
    if group is None or group.support.memory is None:
        prefix.append(f"--as={limits.memory}")
    prefix.append("--")
    if root:
        prefix += [setpriv, f"--reuid={UNPRIVILEGED_UID}", f"--regid={UNPRIVILEGED_UID}",
                   "--clear-groups", "--"]
    return prefix + argv, None


def _pinned_binds(workspace: Path, read_only: Sequence[str]) -> list[str]:
    """Bind each ``read_only`` path read-only over itself, after binding every directory between
    it and the workspace root over itself: a mount point cannot be renamed or removed, so the
    command cannot move ``.git`` aside and put a fresh ``.git/config`` in its place."""
    parents: list[str] = []
    for rel in read_only:
        parts = Path(rel).parts
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            if parent not in parents:
                parents.append(parent)
    return [*[arg for rel in parents
              for arg in ("--bind", str(workspace / rel), f"/workspace/{rel}")],
            *[arg for rel in read_only
              for arg in ("--ro-bind", str(workspace / rel), f"/workspace/{rel}")]]


def bwrap_argv(workspace: Path, command: Sequence[str], *, cwd: str = ".", network: bool = False,
               env: Mapping[str, str] | None = None, tmp_bytes: int = 64 << 20,
               seccomp_fd: int | None = None, read_only: Sequence[str] = (),
               info_fd: int | None = None) -> list[str]:
    """The bwrap command line of the strict profile."""
    argv = ["bwrap", "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
            "--new-session", "--cap-drop", "ALL"]
    if info_fd is not None:
        argv += ["--info-fd", str(info_fd)]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    if network:
        argv += ["--share-net", "--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf",
                 "--ro-bind-try", "/etc/ssl", "/etc/ssl"]
    argv += ["--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib",
             "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin",
             "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
             "--ro-bind-try", "/etc/alternatives", "/etc/alternatives",
             "--proc", "/proc", "--dev", "/dev", "--size", str(tmp_bytes), "--tmpfs", "/tmp",
             "--bind", str(workspace), "/workspace",
             *_pinned_binds(workspace, read_only),
             "--chdir", "/workspace" if cwd in ("", ".") else f"/workspace/{cwd}",
             "--clearenv", "--setenv", "PATH", _SYSTEM_PATH, "--setenv", "HOME", "/workspace",
             "--setenv", "LANG", "C.UTF-8", "--hostname", "sandbox"]
    for key, value in (env or {}).items():
        argv += ["--setenv", key, value]
    return [*argv, "--", *command]


@functools.lru_cache(maxsize=1)
def probe() -> SandboxReport:
    """The best confinement this host offers, probed once per process: bubblewrap, else
    Landlock + seccomp + rlimits, else none."""
    bwrap = probe_bwrap()
    if bwrap.available:
        return bwrap
    from .landlock import landlock_abi

    abi = landlock_abi()
    if abi >= 1:
        return SandboxReport(backend="landlock", available=True,
                             detail=f"Landlock ABI {abi} + seccomp + rlimits + a subreaper "
                                    f"launcher ({bwrap.detail})")
    return SandboxReport(backend="none", available=False,
                         detail=f"{bwrap.detail}, and Landlock is not available")


@functools.lru_cache(maxsize=1)
def probe_bwrap() -> SandboxReport:
    """Whether bubblewrap is installed and can start a sandbox with every namespace unshared
    (unprivileged user namespaces can be off by sysctl, AppArmor or a container)."""
    if shutil.which("bwrap", path=_SYSTEM_PATH) is None:
        return SandboxReport(backend="bwrap", available=False,
                             detail="bwrap is not installed (Debian: apt-get install bubblewrap)")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o777)
        try:
            result = run_confined(Path(tmp), ["/bin/true"], timeout_s=10, output_cap=4096)
        except OSError as exc:
            return SandboxReport(backend="bwrap", available=False, detail=str(exc))
    if result.exit_code != 0:
        return SandboxReport(backend="bwrap", available=False,
                             detail=f"bwrap failed: {result.stderr.strip()[:300]}")
    return SandboxReport(backend="bwrap", available=True,
                         detail="bubblewrap with all namespaces unshared")


class Sandbox(Protocol):
    """A way to run a command confined to a workspace. Chosen once (``default_sandbox`` picks
    the best the host offers) and handed to the tools that run programs."""

    name: ClassVar[str]
    confined: ClassVar[bool]
    """Whether the command is kept away from the host (``False`` only for ``unconfined``)."""
    protects_paths: ClassVar[bool]
    """Whether ``read_only`` workspace paths can be kept unchanged by the command."""

    def run(self, workspace: Path, command: Sequence[str], *, timeout_s: float = 60.0,
            output_cap: int = 1 << 20, network: bool = False,
            env: Mapping[str, str] | None = None, limits: Limits | None = None,
            read_only: Sequence[str] = ()) -> SandboxResult: ...


class BubblewrapSandbox:
    """One bubblewrap sandbox per call (see ``run_confined``)."""

    name: ClassVar[str] = "bubblewrap"
    confined: ClassVar[bool] = True
    protects_paths: ClassVar[bool] = True

    def run(self, workspace: Path, command: Sequence[str], *, timeout_s: float = 60.0,
            output_cap: int = 1 << 20, network: bool = False,
            env: Mapping[str, str] | None = None, limits: Limits | None = None,
            read_only: Sequence[str] = ()) -> SandboxResult:
        return run_confined(workspace, command, timeout_s=timeout_s, output_cap=output_cap,
                            network=network, env=env, limits=limits, read_only=read_only)


class LandlockSandbox:
    """Landlock + seccomp + rlimits under a subreaper launcher (see ``run_landlocked``).

    Landlock rules grant rights on whole trees, so paths inside the writable workspace cannot
    be carved out: ``read_only`` is refused rather than dropped.
    """

    name: ClassVar[str] = "landlock"
    confined: ClassVar[bool] = True
    protects_paths: ClassVar[bool] = False

    def run(self, workspace: Path, command: Sequence[str], *, timeout_s: float = 60.0,
            output_cap: int = 1 << 20, network: bool = False,
            env: Mapping[str, str] | None = None, limits: Limits | None = None,
            read_only: Sequence[str] = ()) -> SandboxResult:
        if read_only:
            raise UsageError("the Landlock sandbox cannot keep workspace paths read-only "
                             f"({', '.join(read_only)}); check protects_paths first")
        return run_landlocked(workspace, command, timeout_s=timeout_s, output_cap=output_cap,
                              network=network, env=env, limits=limits)


class UnconfinedSandbox:
    """No confinement, for an operator who opted in (``security.allow_unconfined``): rlimits,
    a clean environment, a new session, the output cap and the call's cgroup still apply; the
    network and the host's files do not stay out."""

    name: ClassVar[str] = "unconfined"
    confined: ClassVar[bool] = False
    protects_paths: ClassVar[bool] = False

    def run(self, workspace: Path, command: Sequence[str], *, timeout_s: float = 60.0,
            output_cap: int = 1 << 20, network: bool = False,
            env: Mapping[str, str] | None = None, limits: Limits | None = None,
            read_only: Sequence[str] = ()) -> SandboxResult:
        if read_only:
            raise UsageError("without a sandbox, workspace paths cannot be kept read-only")
        return run_unconfined(workspace, command, timeout_s=timeout_s, output_cap=output_cap,
                              env=env, limits=limits)


def default_sandbox() -> Sandbox | None:
    """The confining backend ``probe`` found on this host, or ``None`` when there is none."""
    backend = probe()
    if not backend.available:
        return None
    return BubblewrapSandbox() if backend.backend == "bwrap" else LandlockSandbox()


def run_landlocked(workspace: Path, command: Sequence[str], *, cwd: str = ".",
                   timeout_s: float = 60.0, output_cap: int = 1 << 20, network: bool = False,
                   env: Mapping[str, str] | None = None, limits: Limits | None = None,
                   ) -> SandboxResult:
    """Run under Landlock + seccomp + rlimits (no namespaces) in the workspace, through the
    subreaper launcher (``_reaper.py``) so that no descendant — ``setsid`` ones included —
    outlives the call."""
    from .landlock import LandlockRuleset

    ruleset = LandlockRuleset(workspace, network=network)
    filter_fd = bpf_fd(network)
    passed = (ruleset.fd,) if filter_fd is None else (ruleset.fd, filter_fd)
    uid = UNPRIVILEGED_UID if os.geteuid() == 0 else -1
    argv = [sys.executable, "-I", "-S", str(Path(__file__).with_name("_reaper.py")), str(uid),
            str(ruleset.fd), str(-1 if filter_fd is None else filter_fd), "--", *command]
    try:
        # The launcher keeps the host's uid (the command cannot signal it); its child drops it.
        return _run(argv, cwd=workspace / cwd, env=_command_env(workspace, env),
                    timeout_s=timeout_s, output_cap=output_cap, limits=limits, pass_fds=passed,
                    drop_root=False, stop=_stop_launcher, close_after_start=passed[1:])
    finally:
        ruleset.close()


def _stop_launcher(proc: subprocess.Popen[bytes]) -> None:
    """Ask the launcher to kill everything it adopted; kill its group if it does not."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=KILL_GRACE_S)
    _kill(proc)


def run_confined(workspace: Path, command: Sequence[str], *, cwd: str = ".",
                 timeout_s: float = 60.0, output_cap: int = 1 << 20, network: bool = False,
                 env: Mapping[str, str] | None = None, limits: Limits | None = None,
                 read_only: Sequence[str] = ()) -> SandboxResult:
    """Run ``command`` in a fresh sandbox; never blocks past the timeout.

    ``read_only`` lists existing workspace paths bound read-only over themselves.
    """
    filter_fd = bpf_fd(network)
    info_read, info_write = os.pipe()
    argv = bwrap_argv(workspace, command, cwd=cwd, network=network, env=env,
                      seccomp_fd=filter_fd, read_only=read_only, info_fd=info_write)
    passed = (info_write,) if filter_fd is None else (info_write, filter_fd)
    try:
        return _run(argv, cwd=None, env={"PATH": _SYSTEM_PATH}, timeout_s=timeout_s,
                    output_cap=output_cap, limits=limits, pass_fds=passed, info_fd=info_read,
                    close_after_start=passed)
    finally:
        os.close(info_read)


def run_unconfined(workspace: Path, command: Sequence[str], *, timeout_s: float = 60.0,
                   output_cap: int = 1 << 20, env: Mapping[str, str] | None = None,
                   limits: Limits | None = None) -> SandboxResult:
    """Run without a sandbox (the operator opted in): rlimits, a clean environment, a new
    session and the output cap still apply; so does the call's cgroup where the host has one."""
    return _run(list(command), cwd=workspace, env=_command_env(workspace, env),
                timeout_s=timeout_s, output_cap=output_cap, limits=limits)


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
    out, err, truncated, timed_out = _collect(proc, started + timeout_s, output_cap)
    return SandboxResult(exit_code=proc.returncode, stdout=out.decode("utf-8", "surrogateescape"),
                         stderr=err.decode("utf-8", "replace"), truncated=truncated,
                         timed_out=timed_out, duration_s=time.monotonic() - started)


def _command_env(workspace: Path, env: Mapping[str, str] | None) -> dict[str, str]:
    return {"PATH": _SYSTEM_PATH, "HOME": str(workspace), "LANG": "C.UTF-8", **(env or {})}


def _run(argv: list[str], *, cwd: Path | None, env: dict[str, str], timeout_s: float,
         output_cap: int, limits: Limits | None, pass_fds: Sequence[int] = (),
         close_after_start: Sequence[int] = (), drop_root: bool = True,
         info_fd: int | None = None,
         stop: Callable[[subprocess.Popen[bytes]], None] | None = None) -> SandboxResult:
    """Start ``argv`` in a new session with the limits (and the call's cgroup, if any), read
    its output under the cap until it ends or the deadline passes, and say what happened."""
    limits = limits or Limits(cpu_s=max(1, int(timeout_s) + 1))
    started = time.monotonic()
    with _call_group(limits) as group:
        argv, preexec = _limited(argv, limits, group, drop_root=drop_root)
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                cwd=cwd, env=env, close_fds=True, pass_fds=tuple(pass_fds),
                start_new_session=True, preexec_fn=preexec)
        finally:
            for fd in close_after_start:
                os.close(fd)
        out, err, truncated, timed_out = _collect(proc, started + timeout_s, output_cap,
                                                  info_fd=info_fd, stop=stop or _kill)
        oom = group is not None and group.oom_killed()
    return SandboxResult(exit_code=proc.returncode, stdout=out.decode("utf-8", "replace"),
                         stderr=err.decode("utf-8", "replace"), truncated=truncated,
                         timed_out=timed_out, duration_s=time.monotonic() - started,
                         oom_killed=oom)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _wait_group_gone(group: int, timeout_s: float) -> None:
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


def _collect(proc: subprocess.Popen[bytes], deadline: float, cap: int, *,
             info_fd: int | None = None,
             stop: Callable[[subprocess.Popen[bytes]], None] = _kill,
             ) -> tuple[bytes, bytes, bool, bool]:
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    buffers = {out_fd: bytearray(), err_fd: bytearray()}
    selector = selectors.DefaultSelector()
    for stream in (proc.stdout, proc.stderr):
        os.set_blocking(stream.fileno(), False)
        selector.register(stream, selectors.EVENT_READ)
    namespace = _Namespace(proc.pid)
    if info_fd is not None:
        os.set_blocking(info_fd, False)
        selector.register(info_fd, selectors.EVENT_READ)
    truncated = timed_out = False
    exited_at: float | None = None
    try:
        while selector.get_map():
            now = time.monotonic()
            remaining = deadline - now
            if remaining <= 0:
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
        if truncated or timed_out or exited_at is not None:
            stop(proc)  # the whole group: nothing the command started outlives the call
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()) if not timed_out else 5)
        except subprocess.TimeoutExpired:
            _kill(proc)
            proc.wait(timeout=5)
        if truncated or timed_out or exited_at is not None:
            _wait_group_gone(proc.pid, 5.0)
        namespace.wait_gone(5.0)
        proc.stdout.close()
        proc.stderr.close()
    out = bytes(buffers[out_fd][:cap])
    err = bytes(buffers[err_fd][: max(0, cap - len(out))])
    return out, err, truncated, timed_out
