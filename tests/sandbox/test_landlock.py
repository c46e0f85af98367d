"""The fallback confinement (Landlock + seccomp + rlimits) where bubblewrap cannot run."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from toolkeeper import PolicyViolationError, SandboxLimitError, Tool
from toolkeeper.builtins import shell
from toolkeeper.builtins.policy import DEFAULT_COMMANDS, SecurityPolicy
from toolkeeper.sandbox import LandlockSandbox
from toolkeeper.sandbox.landlock import landlock_abi

from ..processes import running
from ..workspaces import hand_over


def test_this_host_has_landlock() -> None:
    """The tests below run the fallback for real: a host without Landlock fails here."""
    assert landlock_abi() >= 1


@pytest.fixture
def ws(reachable: Path) -> Path:
    root = reachable / "ws"
    root.mkdir()
    hand_over(root)
    (reachable / "outside.txt").write_text("OUTSIDE-SECRET")
    return root


def tool(ws: Path, **policy: object) -> Tool:
    return shell.shell_tool(sandbox=LandlockSandbox(), policy=SecurityPolicy(
        workspace=ws, allowed_commands=(*DEFAULT_COMMANDS, "python3", "sleep", "id", "env", "setsid"),
        **policy))


def run(t: Tool, command: str) -> str:
    return str(t.run_raw({"command": command}))


def test_workspace_writes_work_and_nothing_else_is_reachable(ws: Path) -> None:
    out = run(tool(ws), f"echo hi > a.txt && cat a.txt; cat {ws.parent}/outside.txt; "
                        "touch /tmp/escape-landlock; cat /etc/passwd")
    assert out.startswith("hi\n") and "OUTSIDE-SECRET" not in out
    assert out.count("Permission denied") == 3
    assert not Path("/tmp/escape-landlock").exists()


def test_no_network_and_a_clean_environment(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_TOKEN", "landlock-secret")
    out = run(tool(ws), "env; python3 -c \"import socket; socket.socket(socket.AF_INET)\"")
    assert "landlock-secret" not in out and "Permission denied" in out
    if os.geteuid() == 0:
        assert "65534" in run(tool(ws), "id -u")


def test_timeouts_and_background_children_do_not_stall_the_call(ws: Path) -> None:
    start = time.monotonic()
    assert "started" in run(tool(ws), "sleep 40 & echo started")
    assert time.monotonic() - start < 5
    with pytest.raises(SandboxLimitError):
        run(tool(ws, shell_timeout_s=1), "sleep 41")
    assert time.monotonic() - start < 10


def test_no_descendant_outlives_the_call_not_even_a_setsid_one(ws: Path) -> None:
    a, b, c, d = (_sleep(n) for n in (42, 43, 44, 45))  # this run's own: a twin suite's differ
    out = run(tool(ws), f"{a} & setsid {b} & echo started")
    assert "started" in out
    assert running(a) == [] and running(b) == []
    with pytest.raises(SandboxLimitError):
        run(tool(ws, shell_timeout_s=1), f"setsid {c} & {d}")
    assert running(c) == [] and running(d) == []


def test_the_command_cannot_kill_its_launcher(ws: Path) -> None:
    # The launcher is the parent of `sh`; killing it would orphan the setsid child.
    (ws / "killer.py").write_text(
        "import os\n"
        "stat = open(f'/proc/{os.getppid()}/stat').read()\n"
        "launcher = int(stat.rsplit(')', 1)[1].split()[1])\n"
        "try:\n    os.kill(launcher, 9)\n    print('killed')\n"
        "except OSError as exc:\n    print('refused', exc.errno)\n")
    sleeper = _sleep(46)
    out = run(tool(ws), f"setsid {sleeper} & python3 killer.py")
    assert "refused 1" in out  # EPERM: another uid (root host) or outside the Landlock scope
    assert running(sleeper) == []


def _sleep(seconds: int) -> str:
    """``sleep`` for about ``seconds``, with a fraction of its own: ``running`` then finds this
    test's sleeper only, not one of the same test in another suite running at the same time."""
    return f"sleep {seconds}.{uuid.uuid4().int % 10**6:06d}"


def test_the_allowlist_still_applies(ws: Path) -> None:
    with pytest.raises(PolicyViolationError, match="'whoami' is not an allowed command"):
        run(tool(ws), "ls | whoami")


def test_a_fork_bomb_is_gone_when_the_call_returns(ws: Path) -> None:
    script = "import os\\nwhile True:\\n    try: os.fork()\\n    except OSError: pass"
    bomb = f"tk-landlock-bomb-{uuid.uuid4().hex}"  # this run's own: another suite may run its twin
    with pytest.raises(SandboxLimitError):
        run(tool(ws, shell_timeout_s=2), f"python3 -c \"exec('{script}')\" {bomb}")
    assert running(bomb) == []
    assert run(tool(ws), "echo next") == "next\n\n[exit code 0]"


def test_clean_up_never_follows_a_planted_symlink_out_of_the_workspace(ws: Path) -> None:
    repo = ws.parent / "other-repo" / ".git"
    (repo / "hooks").mkdir(parents=True)
    (repo / "config").write_text("[core]\n")
    out = run(tool(ws), f"python3 -c \"import os; os.symlink('{repo}', '.git')\"; echo planted")
    assert "planted" in out and "created protected paths (.git)" in out
    assert (repo / "config").read_text() == "[core]\n" and (repo / "hooks").is_dir()
    assert not (ws / ".git").is_symlink()


def test_commands_are_refused_while_a_protected_path_exists_landlock_cannot_hide_it(ws: Path
                                                                                    ) -> None:
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n\tfsmonitor = CONFIG-SECRET\n")
    hand_over(ws)
    with pytest.raises(PolicyViolationError) as refused:
        run(tool(ws), "cat .git/config; echo '[alias]' >> .git/config")
    message = str(refused.value)
    assert "\n" not in message and ".git in " in message and "bubblewrap" in message
    assert (ws / ".git" / "config").read_text() == "[core]\n\tfsmonitor = CONFIG-SECRET\n"
