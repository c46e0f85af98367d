"""What every backend shares: a shared path is refused the same way by each, before anything
is started or any descriptor opened."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolkeeper.errors import UsageError
from toolkeeper.sandbox import BubblewrapSandbox, LandlockSandbox, RunOptions, SharedPath


@pytest.mark.parametrize("backend", [BubblewrapSandbox, LandlockSandbox])
@pytest.mark.parametrize("bad", ["relative/dir", "/", "/no/such/directory"])
def test_a_bad_shared_path_is_refused_before_anything_starts(
        backend: type, bad: str, tmp_path: Path) -> None:
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(UsageError, match="a shared path must be an existing absolute directory"):
        backend().run(tmp_path, ["/bin/true"], RunOptions(shared=(SharedPath(Path(bad)),)))
    assert len(os.listdir("/proc/self/fd")) == before  # no descriptor left open
