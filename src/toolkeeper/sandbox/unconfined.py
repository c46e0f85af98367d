"""No confinement, for an operator who opted in (``security.allow_unconfined``)."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from ..errors import UsageError
from .base import Limits, RunOptions, SandboxResult
from .process import command_env, run_process

__all__ = ["UnconfinedSandbox", "run_unconfined"]


def run_unconfined(workspace: Path, command: Sequence[str], *, timeout_s: float = 60.0,
                   output_cap: int = 1 << 20, env: Mapping[str, str] | None = None,
                   limits: Limits | None = None, cancel: threading.Event | None = None
                   ) -> SandboxResult:
    """Run without a sandbox (the operator opted in): rlimits, a clean environment, a new
    session and the output cap still apply; so does the call's cgroup where the host has one."""
    return run_process(list(command), cwd=workspace, env=command_env(workspace, env),
                timeout_s=timeout_s, output_cap=output_cap, limits=limits, cancel=cancel)


class UnconfinedSandbox:
    """No confinement, for an operator who opted in (``security.allow_unconfined``): rlimits,
    a clean environment, a new session, the output cap and the call's cgroup still apply; the
    network and the host's files do not stay out."""

    name: ClassVar[str] = "unconfined"
    confined: ClassVar[bool] = False
    protects_paths: ClassVar[bool] = False
    overlays: ClassVar[bool] = False

    def run(self, workspace: Path, command: Sequence[str], options: RunOptions
            ) -> SandboxResult:
        if options.pass_fds:
            raise UsageError("running without a sandbox cannot hand file descriptors to the command; use "
                             "bubblewrap")
        if options.hidden:
            raise UsageError("without a sandbox, workspace paths cannot be hidden")
        if options.overlay is not None:
            raise UsageError("without a sandbox there is no copy-on-write view of the workspace")
        if options.shared:
            raise UsageError("without a sandbox every host path is reachable; shared paths "
                             "cannot be limited")
        return run_unconfined(workspace, command, timeout_s=options.timeout_s,
                              output_cap=options.output_cap, env=options.env,
                              limits=options.limits, cancel=options.cancel)
