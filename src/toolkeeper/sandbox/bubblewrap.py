"""One bubblewrap sandbox per call.

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
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from .base import (
    SYSTEM_PATH,
    HiddenPath,
    Limits,
    Overlay,
    RunOptions,
    SandboxReport,
    SandboxResult,
    SharedPath,
    check_hidden,
    check_shared,
)
from .limits import counted_inside, exec_helpers
from .overlay import launcher, probe_overlay, sandbox_ids
from .process import run_process
from .seccomp import bpf_fd
from .spare import spares

__all__ = ["BubblewrapSandbox", "ConfinedCommand", "bwrap_argv", "confined_command", "probe_bwrap",
           "run_confined"]


def _outermost(hidden: Sequence[HiddenPath]) -> list[HiddenPath]:
    """The hidden entries not below another hidden directory (already out of sight)."""
    dirs = {h.rel for h in hidden if h.directory}
    return [h for h in dict.fromkeys(hidden)
            if not any(h.rel.startswith(d + "/") for d in dirs if d != h.rel)]


def _open_parents(root: Path | int, rels: Sequence[str]) -> list[int]:
    """An ``O_PATH`` fd of each directory ``rels`` names below ``root`` (a path, or a
    directory fd the caller opened), walked one name at a time without following any symlink
    (``O_NOFOLLOW | O_DIRECTORY``): a directory swapped for a symlink after the caller's check
    fails the run instead of binding what it points to.
    """
    flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fds: list[int] = []
    try:
        for rel in rels:
            fd = os.dup(root) if isinstance(root, int) else os.open(root, flags)
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


def _hiding(root: Path | int, inside: str, hidden: Sequence[HiddenPath], *, writable: bool
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
    return args + _covers(inside, entries), fds


def _covers(inside: str, entries: Sequence[HiddenPath]) -> list[str]:
    """A file covered by ``/dev/null`` (bound without devices: it cannot even be opened), a
    directory by an empty read-only tmpfs."""
    args: list[str] = []
    for item in entries:
        dest = f"{inside}/{item.rel}"
        args += (["--perms", "0555", "--size", "4096", "--tmpfs", dest, "--remount-ro", dest]
                 if item.directory else ["--ro-bind", "/dev/null", dest])
    return args


def _mounts(workspace: Path, hidden: Sequence[HiddenPath], shared: Sequence[SharedPath],
            overlay: Overlay | None = None) -> tuple[list[str], list[int]]:
    """The workspace's hiding binds, then each shared host directory at its own path
    (``--ro-bind`` unless writable, its overlay's view if it has one) with its own; and the
    fds they pass. In an overlay's view nothing the command does reaches the directory, so
    its entries are covered where they are (no directory is pinned in place)."""
    check_shared(shared)
    args, fds = [], []
    try:
        for root, inside, covered, writable, view in [
                (workspace, "/workspace", hidden, True, overlay),
                *[(item.path if item.fd is None else item.fd, str(item.path), item.hidden,
                   item.writable, item.overlay) for item in shared]]:
            if inside != "/workspace":
                args += _bind(root, inside, writable=writable, view=view)
            if view is not None:
                check_hidden(covered)
                args += _covers(inside, _outermost(covered))
                continue
            more, opened = _hiding(root if isinstance(root, int) else Path(root), inside,
                                   covered, writable=writable)
            args += more
            fds += opened
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return args, fds


def _bind(source: Path | str | int, inside: str, *, writable: bool, view: Overlay | None
          ) -> list[str]:
    """The bind of one shared directory: from its overlay's view, its fd or its path."""
    if view is not None:
        return ["--bind" if writable else "--ro-bind", str(view.view), inside]
    if isinstance(source, int):
        return ["--bind-fd" if writable else "--ro-bind-fd", str(source), inside]
    return ["--bind" if writable else "--ro-bind", str(source), inside]


def bwrap_argv(workspace: Path, command: Sequence[str], *, cwd: str = ".", network: bool = False,
               env: Mapping[str, str] | None = None, tmp_bytes: int = 64 << 20,
               seccomp_fd: int | None = None, info_fd: int | None = None,
               mounts: Sequence[str] = (), ids: tuple[int, int] | None = None,
               workspace_fd: int | None = None, egress: tuple[str, str] | None = None,
               scratch_bytes: int | None = None) -> list[str]:
    """The bwrap command line of the strict profile; ``mounts`` go after the workspace's bind
    (``_mounts``: hidden entries and shared directories). ``ids``: the uid and gid the command
    runs as, when bwrap starts inside a namespace of its own (``overlay.launcher``).
    ``workspace_fd``: the workspace as the caller opened it, bound from the fd. ``cwd`` is
    relative to the workspace, or an absolute path inside the sandbox (a shared directory).
    ``egress``: a host unix socket and where it is bound inside (with the system's CA
    certificates): a network namespace of the sandbox's own, loopback only, whose one way out
    is that socket. ``scratch_bytes``: ``/workspace`` is a fresh tmpfs of that size, not
    ``workspace`` (``RunOptions.scratch_bytes``)."""
    bound = (["--perms", "0777", "--size", str(scratch_bytes), "--tmpfs"]
             if scratch_bytes is not None else ["--bind", str(workspace)]
             if workspace_fd is None else ["--bind-fd", str(workspace_fd)])
    argv = ["bwrap", "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
            "--new-session", "--cap-drop", "ALL"]
    if ids is not None:
        argv += ["--uid", str(ids[0]), "--gid", str(ids[1])]
    if info_fd is not None:
        argv += ["--info-fd", str(info_fd)]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    if network:
        argv += ["--share-net", "--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf",
                 "--ro-bind-try", "/etc/ssl", "/etc/ssl"]
    elif egress is not None:
        argv += ["--ro-bind-try", "/etc/ssl", "/etc/ssl"]
    argv += ["--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib",
             "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin",
             "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
             "--ro-bind-try", "/etc/alternatives", "/etc/alternatives",
             "--proc", "/proc", "--dev", "/dev", "--size", str(tmp_bytes), "--tmpfs", "/tmp",
             *bound, "/workspace", *mounts,
             *(["--bind", *egress] if egress is not None else []),
             "--chdir", "/workspace" if cwd in ("", ".") else (
                 cwd if cwd.startswith("/") else f"/workspace/{cwd}"),
             "--clearenv", "--setenv", "PATH", SYSTEM_PATH, "--setenv", "HOME", "/workspace",
             "--setenv", "LANG", "C.UTF-8", "--hostname", "sandbox"]
    for key, value in (env or {}).items():
        argv += ["--setenv", key, value]
    return [*argv, "--", *command]


@dataclass(frozen=True, kw_only=True)
class ConfinedCommand:
    """A command line that starts ``command`` in a bubblewrap sandbox of the strict profile."""

    argv: list[str]
    fds: tuple[int, ...]
    """What bwrap must inherit (the seccomp program, the directories it binds from fds); the
    caller passes them and closes them once bwrap has started."""
    counted: bool
    """``argv`` sets its process limit inside the sandbox (``counted_inside``)."""


def confined_command(workspace: Path, command: Sequence[str], *, limits: Limits,
                     cwd: str = ".", network: bool = False,
                     env: Mapping[str, str] | None = None, hidden: Sequence[HiddenPath] = (),
                     shared: Sequence[SharedPath] = (), overlay: Overlay | None = None,
                     info_fd: int | None = None, workspace_fd: int | None = None,
                     egress: tuple[str, str] | None = None, scratch_bytes: int | None = None
                     ) -> ConfinedCommand:
    """The one way a sandbox is described: the bwrap command line (behind a namespace launcher
    when an overlay needs one) for ``command`` with ``workspace`` at ``/workspace``, hidden
    entries covered and shared directories bound, and the fds it needs. ``egress`` (without
    ``network``): internet sockets are allowed, in a network namespace with loopback alone
    and the one host socket bound in (``bwrap_argv``)."""
    check_shared(shared)  # refuse a bad shared path before any fd is open
    check_hidden(hidden)
    views = [(workspace, overlay)] if overlay is not None else []
    views += [(item.path, item.overlay) for item in shared if item.overlay is not None]
    mounts, mount_fds = _mounts(workspace, hidden, shared, overlay)
    try:
        filter_fd = bpf_fd(network or egress is not None)
    except BaseException:
        for fd in mount_fds:
            os.close(fd)
        raise
    counted = counted_inside(list(command), limits)  # the sandbox's processes, not the uid's
    argv = bwrap_argv(overlay.view if overlay is not None else workspace, counted or command,
                      cwd=cwd, network=network, env=env, seccomp_fd=filter_fd,
                      info_fd=info_fd, mounts=mounts, workspace_fd=workspace_fd,
                      ids=sandbox_ids() if views else None, egress=egress,
                      scratch_bytes=None if overlay is not None else scratch_bytes)
    if views:
        argv = [*launcher(views), *argv]
    fds = tuple(mount_fds) if filter_fd is None else (filter_fd, *mount_fds)
    return ConfinedCommand(argv=argv, fds=fds, counted=counted is not None)


def run_confined(workspace: Path, command: Sequence[str], *, cwd: str = ".",
                 timeout_s: float = 60.0, output_cap: int = 1 << 20, network: bool = False,
                 env: Mapping[str, str] | None = None, limits: Limits | None = None,
                 hidden: Sequence[HiddenPath] = (), pass_fds: Sequence[int] = (),
                 shared: Sequence[SharedPath] = (), overlay: Overlay | None = None,
                 cancel: threading.Event | None = None, spare: bool = False,
                 scratch_bytes: int | None = None) -> SandboxResult:
    """Run ``command`` in a fresh sandbox; never blocks past the timeout.

    ``hidden`` lists existing workspace entries the command may neither read nor change;
    ``overlay`` makes the workspace writable through a copy-on-write view.
    """
    check_shared(shared)  # refuse a bad shared path before any fd is open
    check_hidden(hidden)
    limits = limits or Limits(cpu_s=max(1, int(timeout_s) + 1))
    info_read, info_write = os.pipe()
    try:
        confined = confined_command(workspace, command, limits=limits, cwd=cwd,
                                    network=network, env=env, hidden=hidden, shared=shared,
                                    overlay=overlay, info_fd=info_write,
                                    scratch_bytes=scratch_bytes)
    except BaseException:
        os.close(info_read)
        os.close(info_write)
        raise
    passed = (info_write, *confined.fds)
    try:
        return run_process(confined.argv, cwd=None, env={"PATH": SYSTEM_PATH},
                    timeout_s=timeout_s, output_cap=output_cap, limits=limits,
                    pass_fds=(*passed, *pass_fds), info_fd=info_read,
                    nproc_inside=confined.counted, close_after_start=passed, cancel=cancel,
                    spare=spare)
    finally:
        os.close(info_read)


def prepare_spare(limits: Limits) -> None:
    """Prepare a spare launch gate for a later run with these limits (``RunOptions.spare_gate``)
    in the background, so even the first such run takes one."""
    if exec_helpers() is not None:
        spares.prepare(limits, {"PATH": SYSTEM_PATH})


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

    @property
    def overlays(self) -> bool:
        """Whether this host lets a user namespace mount overlayfs (probed once)."""
        return probe_overlay() is None

    def run(self, workspace: Path, command: Sequence[str], options: RunOptions
            ) -> SandboxResult:
        return run_confined(workspace, command, timeout_s=options.timeout_s,
                            output_cap=options.output_cap, network=options.network,
                            env=options.env, limits=options.limits, hidden=options.hidden,
                            pass_fds=options.pass_fds, shared=options.shared,
                            overlay=options.overlay, cancel=options.cancel,
                            spare=options.spare_gate, scratch_bytes=options.scratch_bytes)
