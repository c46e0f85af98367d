"""Landlock + seccomp + rlimits: the confinement used where bubblewrap cannot run.

The Landlock ruleset is built in the host (paths opened with ``O_PATH``, rules added) and handed
as an fd to the launcher (``_reaper.py``), a child subreaper whose own child calls
``prctl(PR_SET_NO_NEW_PRIVS)``, ``landlock_restrict_self`` and ``prctl(PR_SET_SECCOMP)`` (with a
filter compiled in the host) and execs the command.
Rules: read and execute the system directories, read and write the workspace (and ``/dev/null``;
read the random and zero devices), no TCP (ABI ≥ 4; seccomp closes every other socket family),
and, from ABI 6, no signals to or abstract unix sockets of processes outside the domain.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from ..errors import UsageError
from .base import UNPRIVILEGED_UID, Limits, RunOptions, SandboxResult, SharedPath, check_shared
from .process import KILL_GRACE_S, command_env, kill_group, run_process
from .seccomp import bpf_fd

__all__ = ["LandlockRuleset", "landlock_abi"]

_libc = ctypes.CDLL(None, use_errno=True)
SYS_CREATE, SYS_ADD_RULE = 444, 445  # landlock_restrict_self (446) is called by _reaper.py
RULE_PATH_BENEATH, RULE_NET_PORT = 1, 2

FS = {name: 1 << bit for bit, name in enumerate((
    "execute", "write_file", "read_file", "read_dir", "remove_dir", "remove_file", "make_char",
    "make_dir", "make_reg", "make_sock", "make_fifo", "make_block", "make_sym", "refer",
    "truncate", "ioctl_dev"))}
NET_BIND_TCP, NET_CONNECT_TCP = 1, 2
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2
READ_EXEC = FS["execute"] | FS["read_file"] | FS["read_dir"]
SYSTEM_DIRS = ("/usr", "/bin", "/lib", "/lib64", "/sbin", "/etc/ld.so.cache", "/etc/alternatives",
               "/etc/ssl", "/proc")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@functools.lru_cache(maxsize=1)
def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0 when Landlock is unavailable)."""
    abi = _libc.syscall(SYS_CREATE, None, 0, 1)
    return int(abi) if abi > 0 else 0


def _fs_mask(abi: int) -> int:
    mask = 0
    for name, bit in FS.items():
        if (name == "refer" and abi < 2) or (name == "truncate" and abi < 3) \
                or (name == "ioctl_dev" and abi < 5):
            continue
        mask |= bit
    return mask


class LandlockRuleset:
    """A ruleset for one workspace; its fd goes to the launcher (``_reaper.py``), whose child
    enters it with ``landlock_restrict_self`` just before exec."""

    def __init__(self, workspace: Path, *, network: bool = False,
                 shared: Sequence[SharedPath] = ()) -> None:
        abi = landlock_abi()
        if abi < 1:
            raise OSError("Landlock is not available in this kernel")
        handled = _fs_mask(abi)
        net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 and not network else 0
        attr = _RulesetAttr(handled, net,
                            SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0)
        size = ctypes.sizeof(attr) if abi >= 6 else (16 if abi >= 4 else 8)
        fd = _libc.syscall(SYS_CREATE, ctypes.byref(attr), size, 0)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
        self.fd = int(fd)
        for path in SYSTEM_DIRS:
            self._allow(path, READ_EXEC, handled)
        self._allow(str(workspace), handled, handled)
        for item in shared:
            self._allow(str(item.path), handled if item.writable else READ_EXEC, handled)
        self._allow("/dev/null", FS["read_file"] | FS["write_file"], handled)
        for device in ("/dev/zero", "/dev/random", "/dev/urandom"):  # bwrap's --dev has them too
            self._allow(device, FS["read_file"], handled)

    def _allow(self, path: str, access: int, handled: int) -> None:
        try:
            target = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        try:
            if not os.path.isdir(path):
                access &= FS["execute"] | FS["read_file"] | FS["write_file"] | FS.get(
                    "truncate", 0) | FS.get("ioctl_dev", 0)
            rule = _PathBeneath(access & handled, target)
            if _libc.syscall(SYS_ADD_RULE, self.fd, RULE_PATH_BENEATH, ctypes.byref(rule), 0) < 0:
                raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
        finally:
            os.close(target)

    def close(self) -> None:
        os.close(self.fd)


def run_landlocked(workspace: Path, command: Sequence[str], *, cwd: str = ".",
                   timeout_s: float = 60.0, output_cap: int = 1 << 20, network: bool = False,
                   env: Mapping[str, str] | None = None, limits: Limits | None = None,
                   pass_fds: Sequence[int] = (), shared: Sequence[SharedPath] = (),
                   cancel: threading.Event | None = None) -> SandboxResult:
    """Run under Landlock + seccomp + rlimits (no namespaces) in the workspace, through the
    subreaper launcher (``_reaper.py``) so that no descendant — ``setsid`` ones included —
    outlives the call."""
    check_shared(shared)
    ruleset = LandlockRuleset(workspace, network=network, shared=shared)
    filter_fd = bpf_fd(network)
    passed = (ruleset.fd,) if filter_fd is None else (ruleset.fd, filter_fd)
    uid = UNPRIVILEGED_UID if os.geteuid() == 0 else -1
    argv = [sys.executable, "-I", "-S", str(Path(__file__).with_name("_reaper.py")), str(uid),
            str(ruleset.fd), str(-1 if filter_fd is None else filter_fd), "--", *command]
    try:
        # The launcher keeps the host's uid (the command cannot signal it); its child drops it.
        return run_process(argv, cwd=workspace / cwd, env=command_env(workspace, env),
                    timeout_s=timeout_s, output_cap=output_cap, limits=limits,
                    pass_fds=(*passed, *pass_fds), drop_root=False, stop=_stop_launcher,
                    close_after_start=passed[1:], cancel=cancel)
    finally:
        ruleset.close()


def _stop_launcher(proc: subprocess.Popen[bytes]) -> None:
    """Ask the launcher to kill everything it adopted; kill its group if it does not."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=KILL_GRACE_S)
    kill_group(proc)


class LandlockSandbox:
    """Landlock + seccomp + rlimits under a subreaper launcher (see ``run_landlocked``).

    Landlock rules grant rights on whole trees, so entries inside an allowed tree cannot be
    carved out: ``hidden`` paths (of the workspace or a shared path) are refused rather than
    dropped. Callers check ``protects_paths`` first (``builtins.protected`` refuses a run
    while a protected path exists).
    """

    name: ClassVar[str] = "landlock"
    confined: ClassVar[bool] = True
    protects_paths: ClassVar[bool] = False
    overlays: ClassVar[bool] = False

    def run(self, workspace: Path, command: Sequence[str], options: RunOptions
            ) -> SandboxResult:
        hidden = [h.rel for h in options.hidden] + [
            h.rel for item in options.shared for h in item.hidden]
        if hidden:
            raise UsageError("the Landlock sandbox cannot hide paths inside an allowed tree "
                             f"({', '.join(hidden)}); check protects_paths first")
        if options.overlay is not None or any(s.overlay is not None for s in options.shared):
            raise UsageError("the Landlock sandbox cannot make a copy-on-write view; check "
                             "overlays first")
        return run_landlocked(workspace, command, timeout_s=options.timeout_s,
                              output_cap=options.output_cap, network=options.network,
                              env=options.env, limits=options.limits,
                              pass_fds=options.pass_fds, shared=options.shared,
                              cancel=options.cancel)
