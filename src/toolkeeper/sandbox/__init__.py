"""Running programs confined: one ``Sandbox`` protocol, three backends, and the probe that picks
the best one this host offers.

- ``BubblewrapSandbox``: a bubblewrap sandbox per call (all namespaces, seccomp, rlimits,
  per-call cgroups where the host allows them);
- ``LandlockSandbox``: Landlock + seccomp + rlimits under a subreaper launcher, where bubblewrap
  cannot run;
- ``UnconfinedSandbox``: only when an operator chose it (``security.allow_unconfined``).
"""

from .base import (
    UNPRIVILEGED_UID,
    HiddenPath,
    Limits,
    Overlay,
    RunOptions,
    Sandbox,
    SandboxReport,
    SandboxResult,
    SharedPath,
)
from .bubblewrap import BubblewrapSandbox, probe_bwrap
from .detect import default_sandbox, probe
from .landlock import LandlockSandbox, landlock_abi
from .limits import exec_helpers
from .overlay import new_overlay, probe_overlay, remove_overlay
from .process import run_helper
from .unconfined import UnconfinedSandbox

__all__ = ["UNPRIVILEGED_UID", "BubblewrapSandbox", "HiddenPath", "LandlockSandbox", "Limits",
           "Overlay", "RunOptions", "Sandbox", "SandboxReport", "SandboxResult", "SharedPath",
           "UnconfinedSandbox", "default_sandbox", "exec_helpers", "landlock_abi",
           "new_overlay", "probe", "probe_bwrap", "probe_overlay", "remove_overlay",
           "run_helper"]
