"""shell: the allowlist on every command, and a real bubblewrap sandbox around each call."""

from __future__ import annotations

import errno
import os
import socket
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from toolkeeper import PolicyViolationError, SandboxLimitError, Tool
from toolkeeper.builtins.policy import DEFAULT_COMMANDS, SecurityPolicy
from toolkeeper.builtins.shell import command_words, shell_tool
from toolkeeper.sandbox import UNPRIVILEGED_UID, BubblewrapSandbox

from ..processes import running

EXTRA = ("python3", "sleep", "yes", "setsid", "id", "env")


@pytest.fixture
def base(reachable: Path) -> Path:
    return reachable


@pytest.fixture
def ws(base: Path) -> Path:
    root = base / "ws"
    root.mkdir()
    if os.geteuid() == 0:
        os.chown(root, UNPRIVILEGED_UID, UNPRIVILEGED_UID)
    (base / "outside.txt").write_text("OUTSIDE-SECRET")
    return root


def shell(ws: Path, **policy: object) -> Tool:
    commands = (*DEFAULT_COMMANDS, *EXTRA)
    return shell_tool(SecurityPolicy(workspace=ws, allowed_commands=commands,
                                     **policy), sandbox=BubblewrapSandbox())


def run(tool: Tool, command: str) -> str:
    return str(tool.run_raw({"command": command}))


@pytest.mark.parametrize("command", ["ls | whoami", "ls && whoami", "ls; whoami", "ls || whoami",
                                     "echo $(whoami)", "echo `whoami`", "cat <(whoami)",
                                     "(whoami)", "{ whoami; }", "ls | (cat; whoami)"])
def test_every_command_of_the_line_is_checked(ws: Path, command: str) -> None:
    with pytest.raises(PolicyViolationError, match="'whoami' is not an allowed command"):
        run(shell(ws), command)


def test_a_line_that_cannot_be_analysed_is_refused(ws: Path) -> None:
    with pytest.raises(PolicyViolationError, match="cannot be analysed"):
        run(shell(ws), "echo 'unterminated")


def test_without_the_parser_nothing_runs_and_the_extra_is_named(
        ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "bashlex", None)  # as installed without [builtins]
    with pytest.raises(ImportError, match=r"needs the \[builtins\] extra"):
        run(shell(ws), "echo hello > made.txt")
    assert not (ws / "made.txt").exists()


def test_command_words_reports_constructs() -> None:
    commands, constructs = command_words("A=1 ls > out.txt & echo $(date)")
    assert commands == [["ls"], ["echo", "$(date)"], ["date"]]
    assert constructs == ["assignment", "background", "redirect", "substitution"]


def test_commands_run_in_the_workspace_and_write_there(ws: Path) -> None:
    out = run(shell(ws), "echo hello > greeting.txt && cat greeting.txt && pwd")
    assert out == "hello\n/workspace\n\n[exit code 0]"
    assert (ws / "greeting.txt").read_text() == "hello\n"


def test_the_launchers_secrets_do_not_reach_the_sandbox(ws: Path, monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    monkeypatch.setenv("SECRET_TOKEN", "s3cr3t-value")
    out = run(shell(ws), "cat /proc/1/environ | tr '\\000' '\\n'; env")
    assert "s3cr3t" not in out
    assert "PATH=/usr/bin:/bin" in out


def test_the_host_filesystem_is_out_of_reach(ws: Path, base: Path) -> None:
    out = run(shell(ws), f"cat {base}/outside.txt; cat /etc/shadow; touch /usr/x; ls /")
    assert "OUTSIDE-SECRET" not in out
    assert "No such file" in out and "Read-only file system" in out
    assert not Path("/usr/x").exists()


def test_runs_as_an_unprivileged_user_without_new_namespaces(ws: Path) -> None:
    out = run(shell(ws), "id -u; python3 -c \"import os; os.unshare(os.CLONE_NEWUSER)\"")
    assert out.splitlines()[0] != "0"
    assert "Error" in out or "denied" in out.lower() or "No space" in out


def test_no_network_by_default(ws: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        out = run(shell(ws), f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', "
                             f"{port}), timeout=2)\"")
    finally:
        server.close()
    assert "exit code 1" in out and ("refused" in out or "unreachable" in out
                                      or "Permission denied" in out)


def test_background_and_setsid_children_do_not_survive_the_call(ws: Path) -> None:
    a, b = _sleep(31), _sleep(32)  # this run's own: a twin suite's sleepers differ
    start = time.monotonic()
    out = run(shell(ws), f"{a} & setsid {b} & echo started")
    assert "started" in out and "[exit code 0]" in out
    assert time.monotonic() - start < 30  # the call did not wait for the 31 s sleep
    assert running(a) == [] and running(b) == []


def test_a_timeout_kills_the_whole_sandbox(ws: Path) -> None:
    a, b = _sleep(33), _sleep(34)
    with pytest.raises(SandboxLimitError, match="longer than 1 s"):
        run(shell(ws, shell_timeout_s=1), f"{a} & {b}")
    assert running(a) == [] and running(b) == []


def _sleep(seconds: int) -> str:
    """``sleep`` for about ``seconds``, with a fraction of its own: ``running`` then finds this
    test's sleeper only, not one of the same test in another suite running at the same time."""
    return f"sleep {seconds}.{uuid.uuid4().int % 10**6:06d}"


def test_an_output_flood_is_cut_and_stopped(ws: Path) -> None:
    out = run(shell(ws, max_output_bytes=100_000), "yes flood")
    assert "[output cut at 100000 bytes; the command was stopped]" in out
    assert len(out) < 110_000


def test_a_fork_bomb_is_contained(ws: Path) -> None:
    script = "import os\\nwhile True:\\n    try: os.fork()\\n    except OSError: pass"
    bomb = f"tk-fork-bomb-{uuid.uuid4().hex}"  # this run's own: another suite may run its twin
    with pytest.raises(SandboxLimitError):
        run(shell(ws, shell_timeout_s=3), f"python3 -c \"exec('{script}')\" {bomb}")
    # The call returns only once the kernel has torn the whole pid namespace down: nothing is
    # left, and the sandbox uid's process limit is free for the next call at once.
    assert running(bomb) == []
    assert run(shell(ws), "echo next") == "next\n\n[exit code 0]"


def test_read_only_autonomy_refuses_commands(ws: Path) -> None:
    with pytest.raises(PolicyViolationError, match="read_only"):
        run(shell(ws, autonomy="read_only"), "ls")


def test_concurrent_calls_get_separate_sandboxes(ws: Path) -> None:
    tool = shell(ws)
    outputs: list[str] = []
    threads = [threading.Thread(target=lambda i=i: outputs.append(run(tool, f"echo {i}")))
               for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(o.splitlines()[0] for o in outputs) == ["0", "1", "2", "3"]


def test_seccomp_denies_dangerous_system_calls_inside_the_sandbox(ws: Path) -> None:
    from toolkeeper.sandbox.seccomp import seccomp_bpf

    if seccomp_bpf(False) is None:
        pytest.skip("libseccomp is not available")
    script = ws / "probe.py"
    script.write_text(
        "import ctypes, socket\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "def code(n, *a):\n"
        "    r = libc.syscall(n, *a)\n"
        "    return 0 if r >= 0 else ctypes.get_errno()\n"
        "print('ptrace', code(101, 0, 0, 0, 0))\n"
        "print('io_uring_setup', code(425, 1, 0))\n"
        "print('clone3', code(435, 0, 0))\n"
        "try:\n"
        "    socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "    print('udp', 0)\n"
        "except OSError as exc:\n"
        "    print('udp', exc.errno)\n"
        "socket.socket(socket.AF_UNIX)\n"
        "print('unix', 0)\n")
    out = run(shell(ws), "python3 probe.py")
    lines = dict(line.split() for line in out.splitlines() if line and line[0].isalpha()
                 and len(line.split()) == 2)
    assert lines["ptrace"] == str(errno.EPERM)
    assert lines["io_uring_setup"] == str(errno.EPERM)
    assert lines["clone3"] == str(errno.ENOSYS)
    assert lines["udp"] == str(errno.EACCES)
    assert lines["unix"] == "0"


def test_protected_files_cannot_be_changed_and_created_ones_never_reach_the_workspace(
        ws: Path) -> None:
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (ws / ".vscode").mkdir()
    from ..workspaces import hand_over

    hand_over(ws)
    out = run(shell(ws), "echo '[core]' >> .git/config; echo evil > .git/hooks/pre-commit; "
                         "echo x > .vscode/settings.json; echo alias > .bashrc; "
                         "mkdir -p .claude; echo ok > notes.txt")
    assert (ws / ".git" / "config").read_text() == "[core]\n\tbare = false\n"
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()
    assert not (ws / ".vscode" / "settings.json").exists()
    assert not (ws / ".bashrc").exists() and not (ws / ".claude").exists()
    assert "changes were not applied to the workspace: .bashrc (rule security." in out
    assert ".claude (rule security.forbidden_paths '.claude/*')" in out
    assert (ws / "notes.txt").read_text() == "ok\n"


def test_a_protected_file_cannot_be_replaced_by_moving_its_directory_aside(ws: Path) -> None:
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n")
    from ..workspaces import hand_over

    hand_over(ws)
    out = run(shell(ws), "mv .git .git2; mkdir -p .git/hooks; echo evil > .git/config; "
                         "mv .git/config .git/old; echo ok > .git/HEAD")
    assert "Device or resource busy" in out
    assert (ws / ".git" / "config").read_text() == "[core]\n"
    assert not (ws / ".git2").exists()
    assert not (ws / ".git" / "HEAD").exists()  # all of .git is out of a command's reach


def test_a_symlinked_protected_path_never_brings_an_outside_file_in(ws: Path, base: Path) -> None:
    outside = base / "elsewhere"
    outside.mkdir()
    (outside / "config").write_text("OUTSIDE-CONFIG")
    (ws / ".git").symlink_to(outside)
    out = run(shell(ws), "cat .git/config; echo done")
    assert "OUTSIDE-CONFIG" not in out and "done" in out


@pytest.mark.parametrize("launch", ["exec helpers", "preexec_fn fallback"])
def test_limits_and_the_uid_drop_hold_however_the_sandbox_is_launched(
        ws: Path, launch: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from toolkeeper.sandbox import base, bubblewrap, cgroups, limits

    if launch == "preexec_fn fallback":
        monkeypatch.setattr(limits, "exec_helpers", lambda: None)
    elif limits.exec_helpers() is None:
        pytest.skip("prlimit/setpriv are not installed")
    result = bubblewrap.run_confined(ws, ["sh", "-c", "cat /proc/self/status /proc/self/limits"],
                                     timeout_s=5, limits=base.Limits(cpu_s=7, processes=99))
    status = result.stdout
    if os.geteuid() == 0:
        assert f"Uid:\t{UNPRIVILEGED_UID}\t{UNPRIVILEGED_UID}\t{UNPRIVILEGED_UID}" in status
        assert f"Gid:\t{UNPRIVILEGED_UID}\t{UNPRIVILEGED_UID}\t{UNPRIVILEGED_UID}" in status
    assert "CapEff:\t0000000000000000" in status
    groups = next(line for line in status.splitlines() if line.startswith("Groups:"))
    assert groups.split(":", 1)[1].strip() == ""
    maxima = {" ".join(line.split()[:-3]): line.split()[-3:-1] for line in status.splitlines()
              if line.startswith("Max ")}
    # With prlimit, the limit is set inside the sandbox's own user namespace, where it counts
    # the sandbox's processes only: exactly the call's. Without it (the fallback), it is set on
    # the launcher and counts every task of the uid: with per-call pids groups it is only a
    # backstop with room for several calls; pids.max bounds each call.
    pids_groups = cgroups.probe().pids is not None
    nproc = str(99 * base.CONCURRENT_CALLS if pids_groups and launch != "exec helpers" else 99)
    assert maxima["Max cpu time"] == ["7", "8"] and maxima["Max processes"] == [nproc, nproc]
    assert maxima["Max core file size"] == ["0", "0"] and maxima["Max open files"] == ["256", "256"]


def test_clean_up_never_follows_a_planted_symlink_out_of_the_workspace(ws: Path, base: Path
                                                                        ) -> None:
    """A command replaces .git with a symlink to another repository's .git, using only the
    default allowlist; the host-side clean-up must remove the link, not what it points at."""
    repo = base / "other-repo" / ".git"
    (repo / "hooks").mkdir(parents=True)
    (repo / "config").write_text("[core]\n")
    (repo / "hooks" / "pre-commit").write_text("#!/bin/sh\n")
    command = (f"mkdir -p {base}/other-repo && touch {repo} && cp -s {repo} .git; "
               "ls -la .git")
    out = str(shell_tool(SecurityPolicy(workspace=ws), sandbox=BubblewrapSandbox())
              .run_raw({"command": command}))
    assert (repo / "config").read_text() == "[core]\n"
    assert (repo / "hooks" / "pre-commit").read_text() == "#!/bin/sh\n"
    assert not (ws / ".git").is_symlink() and not (ws / ".git").exists()
    assert "not applied to the workspace: .git (rule security.forbidden_paths '.git')" in out


def test_a_command_line_too_long_to_run_is_a_clear_error_not_a_raw_exception(ws: Path) -> None:
    from toolkeeper import InvalidArgumentsError

    with pytest.raises(InvalidArgumentsError, match="the command line is too long"):
        run(shell(ws), "echo " + "x" * 300_000)


def test_protected_files_are_hidden_from_commands_not_only_kept_unchanged(ws: Path) -> None:
    """The file tools refuse to read them; so does the shell (one rule set)."""
    secrets = {".git/config": "[core]\n\tfsmonitor = CONFIG-SECRET\n",
               "toolkeeper.db-wal": "WAL-SECRET", ".git/hooks/pre-commit": "HOOK-SECRET",
               ".envrc": "ENVRC-SECRET", ".claude/settings.json": "CLAUDE-SECRET",
               "sub/.git/config": "[core]\n\tfsmonitor = NESTED-SECRET\n",
               "sub/lib/.envrc": "NESTED-ENVRC-SECRET", "notes/.mcp.json": "MCP-SECRET",
               "data/toolkeeper.db": "DB-SECRET", "data/readme.txt": "STATE-SIBLING-SECRET"}
    for rel, text in secrets.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    (ws / ".git" / "HEAD").write_text("ref: main\n")
    from ..workspaces import hand_over

    hand_over(ws)
    out = run(shell(ws), " ; ".join(f"cat {rel}" for rel in secrets)
              + " ; ls .git/hooks .claude ; cat .git/HEAD ; echo done")
    assert "SECRET" not in out and "ref: main" not in out and "done" in out
    assert all(f"cat: {rel}: " in out for rel in secrets)  # denied, or not in an empty dir
    assert (ws / "toolkeeper.db-wal").read_text() == "WAL-SECRET"


def test_a_file_a_wildcard_rule_protects_never_reaches_the_workspace(ws: Path) -> None:
    out = run(shell(ws), "echo x > toolkeeper.db-shm; echo ok > notes.txt")
    assert not (ws / "toolkeeper.db-shm").exists()
    assert "toolkeeper.db-shm (rule security.forbidden_paths 'toolkeeper.db-*')" in out
    assert (ws / "notes.txt").read_text() == "ok\n"


def test_commands_run_in_a_workspace_root_owns_and_cannot_change_its_folders(
        base: Path) -> None:
    """As ``make run`` makes it, as root: the workspace and a folder in it are root's. Commands
    (run as uid 65534) still run and create files through the copy-on-write view, whose upper
    layer that uid owns; a folder root owns stays unwritable to them."""
    ws = base / "rooted"
    (ws / "src").mkdir(parents=True)
    out = run(shell(ws), "echo made > new.txt && cat new.txt; echo x > src/in.txt || echo no")
    assert out.startswith("made\n") and (ws / "new.txt").read_text() == "made\n"
    if os.geteuid() == 0:
        assert "Permission denied" in out and not (ws / "src" / "in.txt").exists()
    else:  # commands run as this user, who owns the folder
        assert (ws / "src" / "in.txt").read_text() == "x\n"
