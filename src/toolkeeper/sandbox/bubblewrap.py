"""One bubblewrap sandbox per call (SECURITY.md §4).

All namespaces unshared (no network unless allowed), read-only system binds, the workspace the
only writable bind, a private size-capped ``/tmp``, ``--die-with-parent``, ``--new-session``,
``--cap-drop ALL``, no nested user namespaces. bwrap itself is started with a minimal environment
(bwrap's pid 1 keeps the environment it was started with), ``close_fds``, stdin from
``/dev/null``, a new session, and rlimits; a root host drops to an unprivileged uid first, since
process limits do not bind uid 0. Output is read incrementally under a cap; a timeout or an
output flood kills the whole process group, and with it the pid namespace, so no orphan survives.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from .base import (
    SYSTEM_PATH,
    Limits,
    RunOptions,
    SandboxReport,
    SandboxResult,
    SharedPath,
    check_shared,
)
from .process import run_process
from .seccomp import bpf_fd

__all__ = ["BubblewrapSandbox", "bwrap_argv", "probe_bwrap", "run_confined"]


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


def _shared_binds(shared: Sequence[SharedPath]) -> list[str]:
    """Each shared host directory at its own path: ``--ro-bind`` unless writable."""
    check_shared(shared)
    return [arg for item in shared
            for arg in ("--bind" if item.writable else "--ro-bind", str(item.path), str(item.path))]


def bwrap_argv(workspace: Path, command: Sequence[str], *, cwd: str = ".", network: bool = False,
               env: Mapping[str, str] | None = None, tmp_bytes: int = 64 << 20,
               seccomp_fd: int | None = None, read_only: Sequence[str] = (),
               info_fd: int | None = None, shared: Sequence[SharedPath] = ()) -> list[str]:
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
             *_shared_binds(shared),
             "--chdir", "/workspace" if cwd in ("", ".") else f"/workspace/{cwd}",
             "--clearenv", "--setenv", "PATH", SYSTEM_PATH, "--setenv", "HOME", "/workspace",
             "--setenv", "LANG", "C.UTF-8", "--hostname", "sandbox"]
    for key, value in (env or {}).items():
        argv += ["--setenv", key, value]
    return [*argv, "--", *command]


def run_confined(workspace: Path, command: Sequence[str], *, cwd: str = ".",
                 timeout_s: float = 60.0, output_cap: int = 1 << 20, network: bool = False,
                 env: Mapping[str, str] | None = None, limits: Limits | None = None,
                 read_only: Sequence[str] = (), pass_fds: Sequence[int] = (),
                 shared: Sequence[SharedPath] = (),
                 cancel: threading.Event | None = None) -> SandboxResult:
    """Run ``command`` in a fresh sandbox; never blocks past the timeout.

    ``read_only`` lists existing workspace paths bound read-only over themselves.
    """
    check_shared(shared)  # refuse a bad shared path before any fd is open
    filter_fd = bpf_fd(network)
    info_read, info_write = os.pipe()
    argv = bwrap_argv(workspace, command, cwd=cwd, network=network, env=env,
                      seccomp_fd=filter_fd, read_only=read_only, info_fd=info_write,
                      shared=shared)
    passed = (info_write,) if filter_fd is None else (info_write, filter_fd)
    try:
        return run_process(argv, cwd=None, env={"PATH": SYSTEM_PATH}, timeout_s=timeout_s,
                    output_cap=output_cap, limits=limits, pass_fds=(*passed, *pass_fds),
                    info_fd=info_read, close_after_start=passed, cancel=cancel)
    finally:
        os.close(info_read)


@functools.lru_cache(maxsize=1)
def probe_bwrap() -> SandboxReport:
    """Whether bubblewrap is installed and can start a sandbox with every namespace unshared
    (unprivileged user namespaces can be off by sysctl, AppArmor or a container)."""
    if shutil.which("bwrap", path=SYSTEM_PATH) is None:
        return SandboxReport(backend="bwrap", available=False,
                             detail="bwrap is not installed (Debian: apt-get install bubblewrap)")

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


class BubblewrapSandbox:
    """One bubblewrap sandbox per call (see ``run_confined``)."""

    name: ClassVar[str] = "bubblewrap"
    confined: ClassVar[bool] = True
    protects_paths: ClassVar[bool] = True

    def run(self, workspace: Path, command: Sequence[str], options: RunOptions
            ) -> SandboxResult:
        return run_confined(workspace, command, timeout_s=options.timeout_s,
                            output_cap=options.output_cap, network=options.network,
                            env=options.env, limits=options.limits, read_only=options.read_only,
                            pass_fds=options.pass_fds, shared=options.shared,
                            cancel=options.cancel)
