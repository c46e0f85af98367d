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
    "HiddenPath",
    "Limits",
    "Overlay",
    "RunOptions",
    "Sandbox",
    "SandboxReport",
    "SandboxResult",
    "SharedPath",
    "check_hidden",
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
    start_error: str = ""
    """Why the sandbox never ran the command (its launcher's own message), "" when it did:
    then ``exit_code`` and the output are the launcher's, not the command's."""


@dataclass(frozen=True, kw_only=True)
class SandboxReport:
    """What the start-up probe found."""

    backend: str
    available: bool
    detail: str


@dataclass(frozen=True)
class HiddenPath:
    """An existing entry below a mounted directory that the command may neither read nor
    change, rename or remove: a file is covered by an unopenable device, a directory by an
    empty read-only one.

    ``rel`` must have been checked by the caller through directory fds (reached through real
    directories, not a symlink itself); the backend opens its parents without following any
    symlink and fails the run rather than hide something else."""

    rel: str
    directory: bool = False


@dataclass(frozen=True)
class Overlay:
    """A copy-on-write view of a mounted directory: the command reads the directory as it is
    and every change it makes — new files, edits, removals — lands in ``upper``, a private
    directory outside it, for the host to apply after the run (or not). ``root`` is that
    private directory (made by ``sandbox.overlay.new_overlay``); ``lower`` and ``view`` are
    the mount points the backend uses inside its own mount namespace, ``work`` overlayfs's own
    scratch space."""

    root: Path

    @property
    def upper(self) -> Path:
        return self.root / "upper"

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def lower(self) -> Path:
        return self.root / "lower"

    @property
    def view(self) -> Path:
        return self.root / "view"


@dataclass(frozen=True)
class SharedPath:
    """A host directory the command sees at the same path: read-only unless ``writable``,
    with ``hidden`` entries below it covered (a backend that cannot hide refuses).

    The command runs as an unprivileged user when the host is root, so that user must be
    able to read (or write) it."""

    path: Path
    writable: bool = False
    hidden: tuple[HiddenPath, ...] = ()
    overlay: Overlay | None = None
    """Writable through this copy-on-write view instead of directly (``Overlay``)."""
    fd: int | None = None
    """The directory as the caller opened it (an ``O_PATH`` fd it keeps open for the run):
    bound from the fd rather than the path, so a directory swapped for a symlink after the
    caller resolved it binds nothing else, and one the sandbox's user could not reach by its
    path (below a private home) is bound all the same."""


def check_shared(shared: Sequence[SharedPath]) -> None:
    """Refuse a shared path that is not an existing absolute directory, or is ``/``, or hides
    a path that is not plainly below it."""
    for item in shared:
        path = Path(item.path)
        if not path.is_absolute() or path == Path("/") or not path.is_dir():
            raise UsageError(f"a shared path must be an existing absolute directory other than "
                             f"/ (got {str(path)!r})")
        check_hidden(item.hidden)


def check_hidden(hidden: Sequence[HiddenPath]) -> None:
    """Refuse a hidden path that is not a plain relative path (no ``.``, ``..`` or empty
    part): it must name an entry below its mount, never the mount itself or above it."""
    for item in hidden:
        parts = item.rel.split("/")
        if not item.rel or any(p in ("", ".", "..") or "\x00" in p for p in parts):
            raise UsageError(f"a hidden path must be a plain relative path (got {item.rel!r})")


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """What one confined run may do.

    Attributes:
        timeout_s: Wall-clock limit; the whole sandbox is killed past it.
        output_cap: Bytes of stdout + stderr kept; the command is stopped past it.
        network: Whether the command may use the network.
        env: Environment variables besides PATH, HOME and LANG.
        limits: Resource limits (CPU, memory, processes, files).
        hidden: Existing workspace entries the command may neither read nor change
            (``HiddenPath``); a backend that cannot hide them refuses.
        pass_fds: Open file descriptors the command inherits (a private channel, such as code
            mode's bridge socket); a backend that cannot pass them refuses.
        shared: Host directories besides the workspace the command may see (``SharedPath``).
        overlay: The workspace is writable through this copy-on-write view instead of
            directly (``Overlay``); a backend that cannot make one refuses.
        cancel: Set it from another thread to stop the run early: the whole sandbox is killed
            (within ~0.1 s) and the result says ``timed_out``.
        spare_gate: Take a launcher prepared ahead in its own call group when one is ready
            (``sandbox.spare``): the cgroup move's wait is paid before the run, not in it.
            Backends without a launch gate ignore it.
        scratch_bytes: The workspace is a scratch of the run's own, empty and read by nobody
            after: a backend with a mount namespace (bubblewrap) mounts a fresh memory file
            system of at most this many bytes at ``/workspace`` instead of the host folder, so
            what the command writes there is bounded (and counted in the run's memory);
            Landlock, which has none, writes to the host folder.
    """

    timeout_s: float = 60.0
    output_cap: int = 1 << 20
    network: bool = False
    env: Mapping[str, str] | None = None
    limits: Limits | None = None
    hidden: Sequence[HiddenPath] = ()
    pass_fds: Sequence[int] = ()
    shared: Sequence[SharedPath] = ()
    overlay: Overlay | None = None
    cancel: threading.Event | None = None
    spare_gate: bool = False
    scratch_bytes: int | None = None


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
    """Whether entries below a mounted directory can be hidden from the command
    (``RunOptions.hidden``, ``SharedPath.hidden``)."""

    @property
    def overlays(self) -> bool:
        """Whether a mounted directory can be made writable through a copy-on-write view
        (``RunOptions.overlay``, ``SharedPath.overlay``)."""
        ...

    def run(self, workspace: Path, command: Sequence[str], options: RunOptions
            ) -> SandboxResult:
        """Run ``command`` in ``workspace`` confined, under ``options``; a backend refuses an
        option it cannot honour (``UsageError``) rather than dropping it."""
        ...
