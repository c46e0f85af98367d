"""One bubblewrap sandbox per call: the default confinement on Linux.

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
    HiddenPath,
    Limits,
    RunOptions,
    SandboxReport,
    SandboxResult,
    SharedPath,
    check_hidden,
    check_shared,
)
from .limits import counted_inside
from .process import run_process
from .seccomp import bpf_fd

__all__ = ["BubblewrapSandbox", "bwrap_argv", "probe_bwrap", "run_confined"]


def _outermost(hidden: Sequence[HiddenPath]) -> list[HiddenPath]:
    """The hidden entries not below another hidden directory (already out of sight)."""
    dirs = {h.rel for h in hidden if h.directory}
    return [h for h in dict.fromkeys(hidden)
            if not any(h.rel.startswith(d + "/") for d in dirs if d != h.rel)]


def _open_parents(root: Path, rels: Sequence[str]) -> list[int]:
    """An ``O_PATH`` fd of each directory ``rels`` names below ``root``, walked one name at a
    time without following any symlink (``O_NOFOLLOW | O_DIRECTORY``): a directory swapped
    for a symlink after the caller's check fails the run instead of binding what it points to.
    """
    flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fds: list[int] = []
    try:
        for rel in rels:
            fd = os.open(root, flags)
            try:
                for part in rel.split("/"):
                    step = os.open(part, flags, dir_fd=fd)
                    os.close(fd)
                    fd = step
            except BaseException:
                os.close(fd)
                raise
            fds.append(fd)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return fds


def _hiding(root: Path, inside: str, hidden: Sequence[HiddenPath], *, writable: bool
            ) -> tuple[list[str], list[int]]:
    """bwrap arguments that hide ``hidden`` below ``root`` (mounted at ``inside``), and the
    fds they pass (closed by the caller once bwrap has started).

    Every directory between ``root`` and a hidden entry is first bound over itself, from an fd
    (read-only in a read-only mount): a mount point cannot be renamed or removed, so the
    command cannot move ``.git`` aside and put a fresh ``.git/config`` in its place. Then a
    file is covered by ``/dev/null`` (bound without devices: it cannot even be opened) and a
    directory by an empty read-only tmpfs."""
    check_hidden(hidden)
    entries = _outermost(hidden)
    parents = list(dict.fromkeys("/".join(parts[:depth]) for h in entries
                                 for parts in [h.rel.split("/")]
                                 for depth in range(1, len(parts))))
    fds = _open_parents(root, parents)
    args = [arg for rel, fd in zip(parents, fds, strict=True)
            for arg in ("--bind-fd" if writable else "--ro-bind-fd", str(fd), f"{inside}/{rel}")]
    for item in entries:
        dest = f"{inside}/{item.rel}"
        args += (["--perms", "0555", "--size", "4096", "--tmpfs", dest, "--remount-ro", dest]
                 if item.directory else ["--ro-bind", "/dev/null", dest])
    return args, fds


def _mounts(workspace: Path, hidden: Sequence[HiddenPath], shared: Sequence[SharedPath]
            ) -> tuple[list[str], list[int]]:
    """The workspace's hiding binds, then each shared host directory at its own path
    (``--ro-bind`` unless writable) with its own; and the fds they pass."""
    check_shared(shared)
    args, fds = [], []
    try:
        for root, inside, covered, writable in [
                (workspace, "/workspace", hidden, True),
                *[(item.path, str(item.path), item.hidden, item.writable) for item in shared]]:
            if inside != "/workspace":
                args += ["--bind" if writable else "--ro-bind", str(root), inside]
            more, opened = _hiding(Path(root), inside, covered, writable=writable)
            args += more
            fds += opened
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return args, fds


def bwrap_argv(workspace: Path, command: Sequence[str], *, cwd: str = ".", network: bool = False,
               env: Mapping[str, str] | None = None, tmp_bytes: int = 64 << 20,
               seccomp_fd: int | None = None, info_fd: int | None = None,
               mounts: Sequence[str] = ()) -> list[str]:
    """The bwrap command line of the strict profile; ``mounts`` go after the workspace's bind
    (``_mounts``: hidden entries and shared directories)."""
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
             "--bind", str(workspace), "/workspace", *mounts,
             "--chdir", "/workspace" if cwd in ("", ".") else f"/workspace/{cwd}",
             "--clearenv", "--setenv", "PATH", SYSTEM_PATH, "--setenv", "HOME", "/workspace",
             "--setenv", "LANG", "C.UTF-8", "--hostname", "sandbox"]
    for key, value in (env or {}).items():
        argv += ["--setenv", key, value]
    return [*argv, "--", *command]


def run_confined(workspace: Path, command: Sequence[str], *, cwd: str = ".",
                 timeout_s: float = 60.0, output_cap: int = 1 << 20, network: bool = False,
                 env: Mapping[str, str] | None = None, limits: Limits | None = None,
                 hidden: Sequence[HiddenPath] = (), pass_fds: Sequence[int] = (),
                 shared: Sequence[SharedPath] = (),
                 cancel: threading.Event | None = None) -> SandboxResult:
    """Run ``command`` in a fresh sandbox; never blocks past the timeout.

    ``hidden`` lists existing workspace entries the command may neither read nor change.
    """
    check_shared(shared)  # refuse a bad shared path before any fd is open
    check_hidden(hidden)
    mounts, mount_fds = _mounts(workspace, hidden, shared)
    try:
        filter_fd = bpf_fd(network)
        info_read, info_write = os.pipe()
    except BaseException:
        for fd in mount_fds:
            os.close(fd)
        raise
    limits = limits or Limits(cpu_s=max(1, int(timeout_s) + 1))
    counted = counted_inside(list(command), limits)  # the sandbox's processes, not the uid's
    argv = bwrap_argv(workspace, counted or command, cwd=cwd, network=network, env=env,
                      seccomp_fd=filter_fd, info_fd=info_write, mounts=mounts)
    passed = (info_write, *mount_fds) if filter_fd is None else (
        info_write, filter_fd, *mount_fds)
    try:
        return run_process(argv, cwd=None, env={"PATH": SYSTEM_PATH}, timeout_s=timeout_s,
                    output_cap=output_cap, limits=limits, pass_fds=(*passed, *pass_fds),
                    info_fd=info_read, nproc_inside=counted is not None,
                    close_after_start=passed, cancel=cancel)
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
                            env=options.env, limits=options.limits, hidden=options.hidden,
                            pass_fds=options.pass_fds, shared=options.shared,
                            cancel=options.cancel)
