"""A sandboxed command is held at a gate until the host has put its limits on: one program
fewer in the launch, and nothing of the command runs if a limit cannot be set."""

from __future__ import annotations

import resource
import subprocess
from pathlib import Path
from typing import Any

import pytest

from toolkeeper.sandbox import cgroups, exec_helpers, probe_bwrap
from toolkeeper.sandbox.base import Limits
from toolkeeper.sandbox.bubblewrap import run_confined

pytestmark = pytest.mark.skipif(not probe_bwrap().available or exec_helpers() is None,
                                reason="bubblewrap and util-linux are needed")

LIMITS = Limits(processes=32, memory=512 << 20, file_bytes=16 << 20, open_files=77)


def test_the_launch_execs_no_limit_program_before_bubblewrap(ws: Path, monkeypatch: Any
                                                             ) -> None:
    started: list[list[str]] = []
    real = subprocess.Popen

    def spy(argv: list[str], *args: Any, **kwargs: Any) -> Any:
        started.append(list(argv))
        return real(argv, *args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", spy)
    out = run_confined(ws, ["/bin/sh", "-c", "ulimit -n; ulimit -t"], limits=LIMITS)
    assert out.exit_code == 0, out.stderr
    assert out.stdout.split() == ["77", str(LIMITS.cpu_s)]  # set by the host, inherited
    argv = started[-1]
    programs = [Path(arg).name for arg in argv[:argv.index("bwrap")] if arg.startswith("/")]
    assert "prlimit" not in programs, argv


@pytest.mark.parametrize("error", [PermissionError(1, "Operation not permitted"),
                                   ValueError("current limit exceeds maximum limit")])
def test_a_limit_that_cannot_be_set_runs_nothing_of_the_command(ws: Path, monkeypatch: Any,
                                                                error: Exception,
                                                                caplog: Any) -> None:
    def refuse(*args: Any) -> Any:
        raise error

    monkeypatch.setattr(resource, "prlimit", refuse)
    out = run_confined(ws, ["/bin/sh", "-c", "echo ran > /workspace/ran"], limits=LIMITS)
    assert out.exit_code == 126
    assert "its limits could not be set" in out.stderr
    assert str(error) in caplog.text  # the operator's log says why
    assert not (ws / "ran").exists()


@pytest.mark.skipif(not cgroups.probe().available, reason="no per-call cgroups")
def test_the_command_is_in_the_calls_group_from_its_first_instruction(ws: Path) -> None:
    # the memory cgroup bounds every process of the call: 300 MB in a 64 MB group is killed
    out = run_confined(ws, ["/usr/bin/python3", "-I", "-S", "-c", "b = bytearray(300 << 20)"],
                       limits=Limits(processes=32, memory=64 << 20, file_bytes=16 << 20))
    assert out.exit_code != 0 and out.oom_killed
