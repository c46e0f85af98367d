"""What every sandbox backend shares: the protocol, the limits of a call and what a run did."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

from ..errors import UsageError

__all__ = [
    "CONCURRENT_CALLS",
    "SYSTEM_PATH",
    "UNPRIVILEGED_UID",
    "Limits",
    "RunOptions",
    "Sandbox",
    "SandboxReport",
    "SandboxResult",
    "SharedPath",
    "check_shared",
]

UNPRIVILEGED_UID = 65534


CONCURRENT_CALLS = 8
"""Calls whose processes RLIMIT_NPROC leaves room for when per-call pids groups exist."""


SYSTEM_PATH = "/usr/bin:/bin"


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


@dataclass(frozen=True)
class SharedPath:
    """A host directory the command sees at the same path: read-only unless ``writable``.

    The command runs as an unprivileged user when the host is root, so that user must be
    able to read (or write) it."""

    path: Path
    writable: bool = False


def check_shared(shared: Sequence[SharedPath]) -> None:
    """Refuse a shared path that is not an existing absolute directory, or is ``/``."""
    for item in shared:
        path = Path(item.path)
        if not path.is_absolute() or path == Path("/") or not path.is_dir():
            raise UsageError(f"a shared path must be an existing absolute directory other than "
                             f"/ (got {str(path)!r})")


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """What one confined run may do.

    Attributes:
        timeout_s: Wall-clock limit; the whole sandbox is killed past it.
        output_cap: Bytes of stdout + stderr kept; the command is stopped past it.
        network: Whether the command may use the network.
        env: Environment variables besides PATH, HOME and LANG.
        limits: Resource limits (CPU, memory, processes, files).
        read_only: Existing workspace paths the command must not change.
        pass_fds: Open file descriptors the command inherits (a private channel, such as code
            mode's bridge socket); a backend that cannot pass them refuses.
        shared: Host directories besides the workspace the command may see (``SharedPath``).
        cancel: Set it from another thread to stop the run early: the whole sandbox is killed
            (within ~0.1 s) and the result says ``timed_out``.
    """

    timeout_s: float = 60.0
    output_cap: int = 1 << 20
    network: bool = False
    env: Mapping[str, str] | None = None
    limits: Limits | None = None
    read_only: Sequence[str] = ()
    pass_fds: Sequence[int] = ()
    shared: Sequence[SharedPath] = ()
    cancel: threading.Event | None = None


@dataclass(frozen=True, kw_only=True)
class Limits:
    cpu_s: int = 30
    file_bytes: int = 64 << 20
    processes: int = 128
    open_files: int = 256
    memory: int = 2 << 30
    """Memory of the whole call: a cgroup limit where the host allows per-call groups, else the
    address space of each process (``RLIMIT_AS``)."""


class Sandbox(Protocol):
    """A way to run a command confined to a workspace. Chosen once (``default_sandbox`` picks
    the best the host offers) and handed to the tools that run programs."""

    name: ClassVar[str]
    confined: ClassVar[bool]
    """Whether the command is kept away from the host (``False`` only for ``unconfined``)."""
    protects_paths: ClassVar[bool]
    """Whether ``read_only`` workspace paths can be kept unchanged by the command."""

    def run(self, workspace: Path, command: Sequence[str], options: RunOptions
            ) -> SandboxResult:
        """Run ``command`` in ``workspace`` confined, under ``options``; a backend refuses an
        option it cannot honour (``UsageError``) rather than dropping it."""
        ...
