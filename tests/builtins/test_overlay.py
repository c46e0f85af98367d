"""Applying a command's writes from its copy-on-write view: what an ordinary command does
reaches the workspace as it did (new files, edits, removals, a directory replaced), and what
touches a protected path does not — judged entry by entry, through directory fds, following
nothing the command planted. Real bubblewrap, real overlayfs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolkeeper import Tool
from toolkeeper.builtins.overlay import apply_upper
from toolkeeper.builtins.policy import DEFAULT_COMMANDS, SecurityPolicy
from toolkeeper.builtins.protected import Protection
from toolkeeper.builtins.shell import shell_tool
from toolkeeper.sandbox import BubblewrapSandbox, RunOptions, new_overlay

from ..workspaces import hand_over

COMMANDS = (*DEFAULT_COMMANDS, "rm", "ln", "mkfifo", "chmod", "rmdir")


@pytest.fixture
def ws(reachable: Path) -> Path:
    root = reachable / "ws"
    for rel, text in {"keep.txt": "keep\n", "edit.txt": "one\n", "gone.txt": "x\n",
                      "tree/a.txt": "a\n", "tree/deep/b.txt": "b\n", "swap/c.txt": "c\n",
                      "lib/.git/config": "[core]\n", "lib/code.py": "pass\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    hand_over(root)
    return root


def shell(ws: Path, **policy: object) -> Tool:
    return shell_tool(SecurityPolicy(workspace=ws, autonomy="full",
                                     allowed_commands=COMMANDS, **policy),
                      sandbox=BubblewrapSandbox())


def run(tool: Tool, command: str) -> str:
    return str(tool.run_raw({"command": command}))


def test_an_ordinary_commands_changes_all_reach_the_workspace(ws: Path) -> None:
    out = run(shell(ws), "echo two >> edit.txt && rm gone.txt && rm -r tree && mkdir -p new/d "
                         "&& echo n > new/d/n.txt && rm -r swap && echo now-a-file > swap && "
                         "chmod 600 keep.txt && ln -s keep.txt link && echo done")
    assert "done" in out and "refused" not in out, out
    assert (ws / "edit.txt").read_text() == "one\ntwo\n"
    assert not (ws / "gone.txt").exists() and not (ws / "tree").exists()
    assert (ws / "new" / "d" / "n.txt").read_text() == "n\n"
    assert (ws / "swap").read_text() == "now-a-file\n"  # a directory replaced by a file
    assert (ws / "keep.txt").stat().st_mode & 0o777 == 0o600
    assert os.readlink(ws / "link") == "keep.txt"


def test_a_directory_made_anew_replaces_the_old_ones_contents(ws: Path) -> None:
    run(shell(ws), "rm -r tree && mkdir tree && echo fresh > tree/only.txt")
    assert sorted(p.name for p in (ws / "tree").iterdir()) == ["only.txt"]


def test_removing_a_directory_keeps_the_protected_entries_inside_it(ws: Path) -> None:
    out = run(shell(ws), "rm -rf lib; echo rc=$?")
    assert (ws / "lib" / ".git" / "config").read_text() == "[core]\n"
    assert not (ws / "lib" / "code.py").exists()  # the rest of it is removed
    assert "cannot remove 'lib/.git': Device or resource busy" in out  # said to the command


def test_a_symlink_a_command_plants_is_applied_as_a_link_and_never_followed(
        ws: Path, reachable: Path) -> None:
    outside = reachable / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("VICTIM\n")
    out = run(shell(ws), f"ln -s {outside} escape && mkdir -p sub && ln -s {outside}/victim.txt"
                         " sub/v && echo ok")
    assert "ok" in out
    assert os.readlink(ws / "escape") == str(outside)
    assert (outside / "victim.txt").read_text() == "VICTIM\n"
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]


def test_a_fifo_is_applied_and_nothing_waits_on_it(ws: Path) -> None:
    run(shell(ws), "mkfifo pipe")
    assert (ws / "pipe").is_fifo()


def test_under_a_read_only_workspace_no_change_is_applied_and_each_is_named(ws: Path) -> None:
    out = run(shell(ws, read_only=True), "echo x > new.txt; rm keep.txt; echo rc=$?")
    assert not (ws / "new.txt").exists() and (ws / "keep.txt").exists()
    assert "new.txt (the workspace is read-only, rule security.autonomy)" in out
    assert "keep.txt (the workspace is read-only" in out


def test_a_removal_of_a_directory_holding_a_protected_entry_keeps_that_entry(ws: Path) -> None:
    """An entry that was not hidden from the command (say it appeared after the walk) is still
    judged when the command's removal is applied."""
    protection = Protection(SecurityPolicy(workspace=ws))
    before = protection.state()
    overlay = new_overlay()
    result = BubblewrapSandbox().run(ws, ["rm", "-rf", "lib", "tree"], RunOptions(
        overlay=overlay))  # nothing hidden
    assert result.exit_code == 0, result.stderr
    note = protection.settle(before, overlay, "the command")
    assert (ws / "lib" / ".git" / "config").read_text() == "[core]\n"
    assert not (ws / "lib" / "code.py").exists() and not (ws / "tree").exists()
    assert "lib/.git (rule security.forbidden_paths '.git')" in note
    assert not overlay.root.exists()  # the view's private directory is gone


def test_across_filesystems_each_entry_is_copied_with_its_mode_and_kind(ws: Path,
                                                                        tmp_path: Path) -> None:
    upper = tmp_path / "upper"
    (upper / "new" / "deeper").mkdir(parents=True)
    (upper / "new" / "deeper" / "f.txt").write_text("copied\n")
    (upper / "new" / "deeper" / "f.txt").chmod(0o640)
    (upper / "edit.txt").write_text("changed\n")
    (upper / "ln").symlink_to("edit.txt")
    os.mkfifo(upper / "pipe")
    (upper / ".envrc").write_text("EVIL\n")
    up, into = (os.open(p, os.O_RDONLY | os.O_DIRECTORY) for p in (upper, ws))
    try:
        done = apply_upper(up, into, Protection(SecurityPolicy(workspace=ws)).judge,
                           same_fs=False)
    finally:
        os.close(up)
        os.close(into)
    assert (ws / "new" / "deeper" / "f.txt").read_text() == "copied\n"
    assert (ws / "new" / "deeper" / "f.txt").stat().st_mode & 0o777 == 0o640
    assert (ws / "edit.txt").read_text() == "changed\n"
    assert os.readlink(ws / "ln") == "edit.txt" and (ws / "pipe").is_fifo()
    assert (upper / "edit.txt").exists()  # copied, not moved
    assert not (ws / ".envrc").exists() and [rel for rel, _ in done.refused] == [".envrc"]
    assert not [p.name for p in ws.iterdir() if p.name.endswith(".tmp")]


def test_a_tree_too_deep_to_check_is_not_applied_and_the_next_command_still_runs(
        ws: Path) -> None:
    # applied whole, 130 levels would make the scan before every later command (and every
    # code-mode script) of every client give up: refused, rule workspace.size
    deep = "/".join(["d"] * 130)
    out = run(shell(ws), f"mkdir -p {deep} && echo kept > d/top.txt && echo done")
    assert "done" in out and "rule workspace.size" in out, out
    assert (ws / "d" / "top.txt").read_text() == "kept\n"  # the rest is applied
    assert not (ws / "/".join(["d"] * 128)).exists()  # 127 levels are checked
    again = run(shell(ws), "echo still > still.txt && echo ran")
    assert "ran" in again and "workspace.size" not in again, again
    assert (ws / "still.txt").read_text() == "still\n"


def test_a_run_makes_no_more_directories_than_the_scan_has_room_for(tmp_path: Path) -> None:
    upper, workspace = tmp_path / "upper", tmp_path / "ws"
    (upper / "a" / "b" / "c" / "d").mkdir(parents=True)
    (upper / "a" / "note.txt").write_text("n\n")
    workspace.mkdir()
    up, into = (os.open(path, os.O_RDONLY | os.O_DIRECTORY) for path in (upper, workspace))
    try:
        applied = apply_upper(up, into, lambda rel, directory: None, new_dirs=2)
    finally:
        os.close(up)
        os.close(into)
    assert (workspace / "a" / "b").is_dir() and (workspace / "a" / "note.txt").exists()
    assert not (workspace / "a" / "b" / "c").exists()
    assert [rel for rel, _ in applied.refused] == ["a/b/c"]


def test_a_file_a_command_makes_set_user_id_reaches_the_workspace_without_that_bit(
        ws: Path) -> None:
    # in a shared workspace, a set-user-ID file runs as its owner (the server's user, who
    # holds the state dir) for whoever runs it; the sandbox ignores the bit, the host would not
    out = run(shell(ws), "echo 'echo hi' > suid.sh && chmod 4755 suid.sh && mkdir sgid && "
                         "chmod 2775 sgid && echo x > sgid/f && chmod 6755 sgid/f && "
                         "chmod 4755 keep.txt && echo done")
    assert "done" in out, out
    for rel in ("suid.sh", "sgid", "sgid/f", "keep.txt"):
        mode = (ws / rel).stat().st_mode
        assert mode & 0o6000 == 0, (rel, oct(mode))
        assert mode & 0o755 == 0o755, (rel, oct(mode))  # the rest of the mode as it was made
