"""Which backend this host offers, probed once per process."""

from __future__ import annotations

import functools

from .base import Sandbox, SandboxReport
from .bubblewrap import BubblewrapSandbox, probe_bwrap
from .landlock import LandlockSandbox, landlock_abi

__all__ = ["default_sandbox", "probe"]


@functools.lru_cache(maxsize=1)
def probe() -> SandboxReport:
    """The best confinement this host offers, probed once per process: bubblewrap, else
    Landlock + seccomp + rlimits, else none."""
    bwrap = probe_bwrap()
    if bwrap.available:
        return bwrap
    abi = landlock_abi()
    if abi >= 1:
        return SandboxReport(backend="landlock", available=True,
                             detail=f"Landlock ABI {abi} + seccomp + rlimits + a subreaper "
                                    f"launcher ({bwrap.detail})")
    return SandboxReport(backend="none", available=False,
                         detail=f"{bwrap.detail}, and Landlock is not available")


def default_sandbox() -> Sandbox | None:
    """The confining backend ``probe`` found on this host, or ``None`` when there is none."""
    backend = probe()
    if not backend.available:
        return None
    return BubblewrapSandbox() if backend.backend == "bwrap" else LandlockSandbox()
