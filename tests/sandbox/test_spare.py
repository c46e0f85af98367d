"""The spare launch gate: a run that takes one is limited as any other, each serves one run,
a failed one is never used, and none is left behind."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

import pytest

from toolkeeper.sandbox import cgroups, spare
from toolkeeper.sandbox.base import SYSTEM_PATH, UNPRIVILEGED_UID, Limits, SandboxResult
from toolkeeper.sandbox.bubblewrap import probe_bwrap, run_confined
from toolkeeper.sandbox.limits import exec_helpers
from toolkeeper.sandbox.spare import SpareGates, spares

SUPPORT = cgroups.probe()
pytestmark = [pytest.mark.usefixtures("fresh_spares"), pytest.mark.skipif(
    not (SUPPORT.available and probe_bwrap().available and exec_helpers() is not None),
    reason="no per-call cgroups, bubblewrap or launch helpers here")]

ENV = {"PATH": SYSTEM_PATH}
LIMITS = Limits(cpu_s=10, processes=16, memory=64 << 20, file_bytes=16 << 20)


def _ready(limits: Limits = LIMITS) -> spare.Spare:
    spares.prepare(limits, ENV)
    assert spares.wait_ready(30), f"no spare was prepared ({spares.failures} failures)"
    held = spares._spare
    assert held is not None
    return held


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _gone(paths: list[Path], pid: int, timeout_s: float = 30) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(p.exists() for p in paths) and not _alive(pid):
            return True
        time.sleep(0.01)
    return False


def test_a_run_from_a_spare_is_held_to_its_memory_limit(ws: Path) -> None:
    held = _ready()
    served = spares.served
    result = run_confined(ws, ["python3", "-c", "x = bytearray(300 << 20); print('allocated')"],
                          limits=LIMITS, timeout_s=30, spare=True)
    assert spares.served == served + 1  # the run took the spare
    assert "allocated" not in result.stdout
    assert result.oom_killed
    assert not any(d.exists() for d in held.dirs_seen)


def test_a_fork_bomb_in_a_run_from_a_spare_is_stopped_by_its_groups_process_limit(
        ws: Path) -> None:
    held = _ready()
    assert SUPPORT.pids is not None
    pids_dir = next(d for d in held.dirs_seen if d.is_relative_to(SUPPORT.pids))
    script = ("import os, time\nn = 0\nwhile n < 500:\n    try:\n        if os.fork() == 0:\n"
              "            time.sleep(30)\n        n += 1\n    except OSError:\n        break\n"
              "print('forked', n, flush=True)\ntime.sleep(30)\n")
    hit = 0

    def watch() -> None:
        nonlocal hit
        deadline = time.monotonic() + 60
        while hit == 0 and time.monotonic() < deadline and pids_dir.exists():
            with contextlib.suppress(OSError, IndexError, ValueError):
                hit = int((pids_dir / "pids.events").read_text().split()[1])
            time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    result = run_confined(ws, ["python3", "-c", script], limits=LIMITS, timeout_s=8,
                          spare=True)
    watcher.join()
    assert "forked" in result.stdout
    assert int(result.stdout.split()[1]) < LIMITS.processes
    assert hit > 0 or not SUPPORT.pids, "the group's pids.max never refused a fork"
    assert _gone([pids_dir], -1)


def test_two_runs_never_share_a_spare_or_its_group(ws: Path) -> None:
    first = _ready()
    run_confined(ws, ["true"], limits=LIMITS, timeout_s=30, spare=True)
    second = _ready()
    assert second is not first
    assert set(second.dirs_seen).isdisjoint(first.dirs_seen)
    assert first.proc is None and first.group is None  # spent: killed and its group removed
    served = spares.served
    result = run_confined(ws, ["sh", "-c", "echo ok"], limits=LIMITS, timeout_s=30, spare=True)
    assert result.stdout == "ok\n" and spares.served == served + 1


def test_a_spare_for_other_limits_is_discarded_not_used(ws: Path) -> None:
    held = _ready(Limits(cpu_s=10, processes=16, memory=128 << 20))
    served = spares.served
    result = run_confined(ws, ["sh", "-c", "echo ok"], limits=LIMITS, timeout_s=30, spare=True)
    assert result.stdout == "ok\n"
    assert spares.served == served
    assert _gone(held.dirs_seen, held.pid)


def test_a_spare_that_could_not_start_is_never_used_and_the_run_still_runs(
        ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spare, "GATE_PYTHON", "/nonexistent/python3")
    failures = spares.failures
    spares.prepare(LIMITS, ENV)
    deadline = time.monotonic() + 30
    while spares.failures == failures and time.monotonic() < deadline:
        time.sleep(0.01)
    assert spares.failures == failures + 1 and not spares.wait_ready(0)
    result = run_confined(ws, ["sh", "-c", "echo ok"], limits=LIMITS, timeout_s=30, spare=True)
    assert result.stdout == "ok\n" and result.exit_code == 0
    spares.wait_ready(30)  # the replacement the run's take began (it fails as well)
    assert SUPPORT.memory is not None
    assert list(SUPPORT.memory.glob(f"toolkeeper-{os.getpid()}-*")) == []


def test_a_spare_whose_gate_died_is_not_used(ws: Path) -> None:
    held = _ready()
    os.killpg(held.pid, 9)
    assert held.proc is not None
    held.proc.wait(timeout=30)
    served = spares.served
    result = run_confined(ws, ["sh", "-c", "echo ok"], limits=LIMITS, timeout_s=30, spare=True)
    assert result.stdout == "ok\n" and spares.served == served
    assert _gone(held.dirs_seen, held.pid)


def test_no_spare_process_or_group_remains_after_close() -> None:
    held = _ready()
    assert _alive(held.pid) and all(d.exists() for d in held.dirs_seen)
    spares.close()
    assert _gone(held.dirs_seen, held.pid)


def test_a_spare_unused_for_long_is_killed_and_its_group_removed() -> None:
    keeper = SpareGates(idle_s=0.3)
    try:
        keeper.prepare(LIMITS, ENV)
        assert keeper.wait_ready(30)
        held = keeper._spare
        assert held is not None
        assert _gone(held.dirs_seen, held.pid)
        assert keeper._spare is None
    finally:
        keeper.close()


def test_a_gate_whose_host_end_closes_runs_nothing_and_exits() -> None:
    held = _ready()
    with spares._lock:
        spares._spare = None
    assert held.host is not None
    held.host.close()
    held.host = None
    assert held.proc is not None
    assert held.proc.wait(timeout=30) == 126
    held.discard()
    assert _gone(held.dirs_seen, held.pid)


def test_a_run_from_a_spare_has_every_rlimit_of_its_call(ws: Path) -> None:
    _ready()
    served = spares.served
    result = run_confined(ws, ["cat", "/proc/self/limits"], limits=LIMITS, timeout_s=30,
                          spare=True)
    assert spares.served == served + 1
    rows = {line[:26].strip(): line[26:].split()[:2] for line in result.stdout.splitlines()[1:]}
    assert rows["Max cpu time"] == [str(LIMITS.cpu_s), str(LIMITS.cpu_s + 1)]
    assert rows["Max file size"] == [str(LIMITS.file_bytes)] * 2
    assert rows["Max open files"] == [str(LIMITS.open_files)] * 2
    assert rows["Max core file size"] == ["0", "0"]


_VIEW = """
import fcntl, socket, struct
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
names = [line.split(":")[0].strip() for line in open("/proc/net/dev").read().splitlines()[2:]]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
up = []
for name in names:
    raw = fcntl.ioctl(s.fileno(), 0x8913, struct.pack("256s", name.encode()))  # SIOCGIFFLAGS
    if struct.unpack_from("16sH", raw)[1] & 1:  # IFF_UP
        up.append(name)
try:
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).connect(("192.0.2.1", 9))
    reach = "reach"
except OSError:
    reach = "unreachable"
print(status["NoNewPrivs"].strip(), status["CapEff"].strip(), status["CapPrm"].strip(),
      ",".join(names), ",".join(up) or "-", reach)
"""


@pytest.mark.parametrize("use_spare", [True, False], ids=["spare", "no-spare"])
def test_the_sandboxs_view_is_the_same_with_or_without_a_spare(ws: Path, use_spare: bool
                                                                ) -> None:
    """no_new_privs on, no capability kept, no interface but the loopback (bubblewrap brings it
    up in its new network namespace), no way out (an internet socket is refused)."""
    result = _confined_python(ws, _VIEW, use_spare)
    assert result.stdout.split() == ["1", "0" * 16, "0" * 16, "lo", "lo", "unreachable"], (
        result.stdout, result.stderr)


def _confined_python(ws: Path, script: str, use_spare: bool) -> SandboxResult:
    """``python3 -I -S -c script`` confined, from a spare gate or not (checked)."""
    if use_spare:
        _ready()
    served = spares.served
    result = run_confined(ws, ["python3", "-I", "-S", "-c", script], limits=LIMITS,
                          timeout_s=30, spare=use_spare)
    assert spares.served == served + (1 if use_spare else 0)
    return result


_IDS = """
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
print("|".join(" ".join(status[k].split()) for k in (
    "Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs",
    "Seccomp")))
"""


def test_a_run_from_a_spare_has_the_ids_groups_and_capabilities_of_one_without(ws: Path
                                                                               ) -> None:
    """The spare's gate drops root itself (no ``setpriv`` exec): the sandboxed command's
    user and group ids, supplementary groups, every capability set, no_new_privs and seccomp
    are what the ``setpriv`` path gives - with supplementary groups on the host to clear."""
    seen = {}
    host_groups = os.getgroups()
    if os.geteuid() == 0:
        os.setgroups([4, 27])  # inherited by the gate, which must not pass them on
    try:
        for use_spare in (True, False):
            result = _confined_python(ws, _IDS, use_spare)
            assert result.exit_code == 0, result.stderr
            seen[use_spare] = result.stdout.strip()
    finally:
        if os.geteuid() == 0:
            os.setgroups(host_groups)
    assert seen[True] == seen[False], seen
    uid, gid, groups, inheritable, permitted, effective, *_ = seen[True].split("|")
    assert groups == "" and inheritable == permitted == effective == "0" * 16, seen[True]
    if os.geteuid() == 0:  # dropped to the unprivileged uid, which bubblewrap maps as itself
        assert uid.split() == [str(UNPRIVILEGED_UID)] * 4 == gid.split(), seen[True]


def test_a_spare_finds_a_command_on_its_path_as_execvp_does() -> None:
    held = _ready()
    with spares._lock:
        spares._spare = None
    proc = held.hand(["sh", "-c", "exit 7"], env=ENV, cwd=None, fds=(), rlimits=[])
    try:
        assert proc.wait(timeout=30) == 7
    finally:
        held.discard()
