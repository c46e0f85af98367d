"""A seccomp filter for the sandbox (defence in depth under bubblewrap's namespaces).

Built once in the parent with libseccomp (``pyseccomp``) and handed to bwrap with
``--seccomp FD``: no allocation happens in the child. Denied: tracing, mounts, namespace and
keyring calls, BPF, perf, userfaultfd, io_uring, cross-process memory access, module and kexec
calls, ``personality``, terminal injection ioctls, new user namespaces through ``clone``,
``clone3`` (ENOSYS, so libcs fall back to ``clone``), and sockets other than AF_UNIX when the
sandbox has no network.
"""

from __future__ import annotations

import errno
import functools
import os
import tempfile

__all__ = ["seccomp_bpf"]

_DENIED = (
    "ptrace", "mount", "umount2", "pivot_root", "unshare", "setns", "keyctl", "add_key",
    "request_key", "bpf", "perf_event_open", "userfaultfd", "kexec_load", "kexec_file_load",
    "init_module", "finit_module", "delete_module", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "process_vm_readv", "process_vm_writev", "personality", "syslog",
    "reboot", "swapon", "swapoff", "acct", "open_by_handle_at", "name_to_handle_at",
)
AF_UNIX = 1
CLONE_NEWUSER = 0x10000000
TIOCSTI = 0x5412
TIOCLINUX = 0x541C


@functools.lru_cache(maxsize=2)
def seccomp_bpf(network: bool) -> bytes | None:
    """The compiled BPF program, or ``None`` when libseccomp is not available."""
    try:
        import pyseccomp as seccomp
    except (ImportError, OSError):
        return None
    try:
        flt = seccomp.SyscallFilter(seccomp.ALLOW)
        for name in _DENIED:
            try:
                flt.add_rule(seccomp.ERRNO(errno.EPERM), name)
            except (RuntimeError, ValueError, OSError):
                continue  # a syscall this kernel or architecture does not have
        flt.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
        flt.add_rule(seccomp.ERRNO(errno.EPERM), "clone",
                     seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER))
        for request in (TIOCSTI, TIOCLINUX):
            flt.add_rule(seccomp.ERRNO(errno.EPERM), "ioctl", seccomp.Arg(1, seccomp.EQ, request))
        if not network:
            flt.add_rule(seccomp.ERRNO(errno.EACCES), "socket", seccomp.Arg(0, seccomp.NE, AF_UNIX))
        with tempfile.TemporaryFile() as out:
            flt.export_bpf(out)
            out.seek(0)
            return out.read()
    except Exception:
        return None


def bpf_fd(network: bool) -> int | None:
    """A readable fd holding the BPF program, for ``bwrap --seccomp FD`` (caller closes it)."""
    program = seccomp_bpf(network)
    if program is None:
        return None
    read_end, write_end = os.pipe()
    os.write(write_end, program)
    os.close(write_end)
    return read_end
