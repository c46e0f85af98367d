"""Per-call cgroups: a memory limit for the whole command instead of an address-space limit,
a process limit per call, and nothing left behind."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from toolkeeper import Tool
from toolkeeper.builtins.policy import DEFAULT_COMMANDS, SecurityPolicy
from toolkeeper.builtins.shell import shell_tool
from toolkeeper.config import load_config
from toolkeeper.config.gating import policy_from
from toolkeeper.sandbox import cgroups, probe
from toolkeeper.sandbox.cgroups import CallGroup

SUPPORT = cgroups.probe()
# A spare launch gate another file's code-mode run left prepared has a group of this process
# too: closed around each test, so the groups counted here are the test's own.
pytestmark = [pytest.mark.usefixtures("fresh_spares"),
              pytest.mark.skipif(not (SUPPORT.available and probe().available),
                                 reason=f"no per-call cgroups: {SUPPORT.detail}")]


def shell(ws: Path, **policy: object) -> Tool:
    return shell_tool(SecurityPolicy(workspace=ws, allowed_commands=(*DEFAULT_COMMANDS, "python3"),
                                     **policy))


def run(tool: Tool, command: str) -> str:
    return str(tool.run_raw({"command": command}))


def _leftover_groups() -> list[Path]:
    parents = {p for p in (SUPPORT.memory, SUPPORT.pids) if p is not None}
    return [g for parent in parents for g in parent.glob(f"toolkeeper-{os.getpid()}-*")]


def test_going_over_the_memory_limit_kills_the_command_and_says_which_rule(ws: Path) -> None:
    out = run(shell(ws, max_memory_bytes=64 << 20),
              "python3 -c \"x = bytearray(300 << 20); print('allocated')\"")
    assert "allocated" not in out
    assert "[killed: the command went over its memory limit of 64 MiB " \
           "(rule security.max_memory_mb)]" in out
    assert _leftover_groups() == []


def test_reserving_address_space_is_not_mistaken_for_using_memory(ws: Path) -> None:
    # Runtimes (JVMs, Go, V8) reserve far more address space than they use; an RLIMIT_AS of
    # the memory limit would make this fail, the cgroup only counts what is touched.
    out = run(shell(ws, max_memory_bytes=256 << 20),
              "python3 -c \"import mmap; m = mmap.mmap(-1, 4 << 30); m[0] = 1; print('reserved')\"")
    assert out.startswith("reserved"), out


def test_the_memory_limit_covers_the_whole_call_not_each_process(ws: Path) -> None:
    # Four processes of 40 MiB each stay under a per-process cap of 64 MiB but not under a
    # call-wide 64 MiB limit.
    (ws / "four.py").write_text(
        "import os, time\n"
        "for _ in range(2):\n    os.fork()\n"  # four processes
        "x = bytearray(40 << 20)\nfor i in range(0, len(x), 4096): x[i] = 1\n"
        "time.sleep(1)\nprint('survived', flush=True)\n")
    out = run(shell(ws, max_memory_bytes=64 << 20), "python3 four.py")
    assert "memory limit of 64 MiB" in out
    assert out.count("survived") < 4


def test_the_group_is_removed_after_every_call(ws: Path) -> None:
    tool = shell(ws)
    for _ in range(3):
        assert run(tool, "echo hi").startswith("hi")
    assert _leftover_groups() == []


def test_a_call_group_kills_what_is_left_in_it(tmp_path: Path) -> None:
    group = CallGroup(SUPPORT, memory_bytes=128 << 20, pids=16)
    with group:
        proc = subprocess.Popen(["sleep", "60"], preexec_fn=group.join)
        time.sleep(0.1)
        assert proc.pid in cgroups._members(group.dirs)
    assert proc.wait(timeout=5) == -9
    assert _leftover_groups() == []


def test_the_config_sets_the_memory_limit(tmp_path: Path) -> None:
    (tmp_path / "toolkeeper.toml").write_text("[security]\nmax_memory_mb = 300\n")
    policy = policy_from(load_config(tmp_path / "toolkeeper.toml"))
    assert policy.max_memory_bytes == 300 << 20


def test_a_group_that_cannot_be_made_falls_back_to_address_space_limits(
        ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: CallGroup) -> CallGroup:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(CallGroup, "__enter__", refuse)
    tool = shell(ws, max_memory_bytes=256 << 20)
    assert run(tool, "echo still-runs").startswith("still-runs")
    out = run(tool, "python3 -c \"import mmap; m = mmap.mmap(-1, 4 << 30); print('reserved')\"")
    assert "reserved" not in out
    assert "Cannot allocate memory" in out or "MemoryError" in out, out


@pytest.mark.skipif(SUPPORT.pids is None, reason="no per-call pids groups")
def test_one_calls_fork_bomb_neither_outgrows_its_group_nor_starves_another_call(ws: Path) -> None:
    script = "import os\\nwhile True:\\n    try: os.fork()\\n    except OSError: pass"
    outcome: dict[str, str] = {}

    def bomb() -> None:
        try:
            run(shell(ws, shell_timeout_s=8), f"python3 -c \"exec('{script}')\"")
        except Exception as exc:  # the timeout
            outcome["bomb"] = type(exc).__name__

    thread = threading.Thread(target=bomb)
    thread.start()
    # (Scanning /proc here would block: a fork bomb holds its processes' memory locks.)
    assert SUPPORT.pids is not None
    current = hit = 0
    deadline = time.monotonic() + 60
    while hit == 0 and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)  # until the group has refused a fork, however slowly the call starts
        for group in SUPPORT.pids.glob(f"toolkeeper-{os.getpid()}-*"):
            try:
                current = int((group / "pids.current").read_text())
                hit = int((group / "pids.events").read_text().split()[1])  # "max N": refused
            except (OSError, IndexError, ValueError):
                continue  # the group is being made or removed
    assert hit > 0, f"no fork was refused while the bomb ran (saw {current} processes)"
    assert run(shell(ws), "echo other call") == "other call\n\n[exit code 0]"
    thread.join()
    assert outcome["bomb"] == "SandboxLimitError"
    assert (group / "pids.max").exists() is False  # removed after the call
    assert 0 < current <= 128  # Limits.processes is the call's pids.max


def test_groups_left_by_a_dead_host_are_swept() -> None:
    assert SUPPORT.memory is not None
    gone = subprocess.Popen(["true"])
    gone.wait(timeout=30)
    stale = SUPPORT.memory / f"toolkeeper-{gone.pid}-0"
    alive = SUPPORT.memory / f"toolkeeper-{os.getppid()}-999"
    stale.mkdir()
    alive.mkdir()
    try:
        swept = cgroups.sweep_stale(SUPPORT.memory)  # and any other dead host's (another test run)
        assert stale in swept and alive not in swept
        assert not stale.exists() and alive.exists()
    finally:
        for group in (stale, alive):
            if group.exists():
                group.rmdir()


def test_a_dead_hosts_group_still_holding_a_process_is_emptied_and_swept() -> None:
    # A host that dies while a sandbox is starting leaves bubblewrap's init waiting forever in
    # the call's group: the sweep of a later host kills what such a group holds, then removes it.
    assert SUPPORT.memory is not None
    gone = subprocess.Popen(["true"])
    gone.wait(timeout=30)
    stale = SUPPORT.memory / f"toolkeeper-{gone.pid}-0"
    stale.mkdir()
    procs = stale / "cgroup.procs"
    # the sleeper joins the group and is left to init (its parent shell exits at once)
    started = subprocess.run(
        ["sh", "-c", 'sh -c \'echo 0 > "$1" && exec sleep 600\' sh "$0" >/dev/null 2>&1 & '
         'echo $!', str(procs)], capture_output=True, text=True, timeout=30, check=True)
    sleeper = int(started.stdout.strip())
    try:
        deadline = time.monotonic() + 30
        while str(sleeper) not in procs.read_text().split():
            assert time.monotonic() < deadline, "the sleeper never joined its group"
            time.sleep(0.01)
        swept = cgroups.sweep_stale(SUPPORT.memory)
        assert stale in swept and not stale.exists()
        deadline = time.monotonic() + 30
        while Path(f"/proc/{sleeper}").exists() and \
                Path(f"/proc/{sleeper}/stat").read_text().split()[2] != "Z":
            assert time.monotonic() < deadline, "the process in the stale group lives on"
            time.sleep(0.01)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(sleeper, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while stale.exists() and time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                stale.rmdir()
            time.sleep(0.01)
