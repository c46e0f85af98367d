"""What another program reads as configuration never comes out of a sandboxed run.

A command that writes ``.git/commondir`` (pointing git at a folder whose ``config`` sets
``core.fsmonitor``), or a nested repository's ``.git/config``, would make the person's next
``git status`` run a program on the host, outside every sandbox. Here the real sandbox runs the
command, and the person's own git runs on the host afterwards: the program must not run. And
``git_operations`` follows no planted path to another configuration."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from toolkeeper import PolicyViolationError, Tool
from toolkeeper.builtins.git import git_tool
from toolkeeper.builtins.policy import DEFAULT_COMMANDS, SecurityPolicy
from toolkeeper.builtins.shell import shell_tool
from toolkeeper.sandbox import BubblewrapSandbox, LandlockSandbox, Sandbox

from ..workspaces import hand_over


@pytest.fixture
def repo(reachable: Path) -> Path:
    """A repository the sandbox user owns, with one commit."""
    root = reachable / "ws"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True, timeout=60)
    (root / "hello.txt").write_text("hello\n")
    subprocess.run(["git", "-C", str(root), "add", "hello.txt"], check=True, timeout=60)
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-qm", "first"], check=True, timeout=60)
    hand_over(root)
    return root


@pytest.fixture
def marker(reachable: Path) -> Path:
    """Where a program that ran would leave its mark (outside the workspace)."""
    return reachable / "a-program-ran"


def _evil_config(marker: Path) -> str:
    return f'[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "touch {marker}; false"\n'


def _persons_git_status(where: Path) -> None:
    """``git status`` as the workspace's owner runs it on the host (no sandbox)."""
    subprocess.run(["git", "-c", "safe.directory=*", "status"], cwd=where, capture_output=True,
                   timeout=60, check=False)


def shell(ws: Path) -> Tool:
    return shell_tool(SecurityPolicy(workspace=ws, autonomy="full",
                                     allowed_commands=DEFAULT_COMMANDS),
                      sandbox=BubblewrapSandbox())


def test_a_commondir_a_command_writes_never_makes_the_persons_git_run_a_program(
        repo: Path, marker: Path) -> None:
    config = _evil_config(marker).replace("\n", "\\n").replace("\t", "\\t")
    out = str(shell(repo).run_raw({"command": (
        f"mkdir -p evil && cp -r .git/objects .git/refs evil/ && printf '{config}' > evil/config"
        " && echo ../evil > .git/commondir; echo ../evil > .git/config.worktree; echo done")}))
    assert "done" in out
    assert not (repo / ".git" / "commondir").exists()
    assert not (repo / ".git" / "config.worktree").exists()
    _persons_git_status(repo)
    assert not marker.exists(), "the person's git status ran the planted fsmonitor"


def test_a_nested_repository_a_command_makes_does_not_survive_the_run(repo: Path, marker: Path
                                                                      ) -> None:
    config = _evil_config(marker).replace("\n", "\\n").replace("\t", "\\t")
    out = str(shell(repo).run_raw({"command": (
        f"mkdir -p sub/.git/objects sub/.git/refs sub/.git/hooks && printf '{config}' > "
        "sub/.git/config && echo 'ref: refs/heads/main' > sub/.git/HEAD && echo x > sub/a.txt")}))
    assert not (repo / "sub" / ".git").exists()
    assert (repo / "sub" / "a.txt").read_text() == "x\n"  # the rest of the run is applied
    assert "sub/.git (rule security.forbidden_paths '.git')" in out
    _persons_git_status(repo / "sub")
    assert not marker.exists()


def test_a_nested_repository_is_hidden_from_commands_at_any_depth(repo: Path) -> None:
    nested = repo / "vendor" / "lib" / ".git"
    nested.mkdir(parents=True)
    (nested / "config").write_text("[core]\n\tfsmonitor = NESTED-SECRET\n")
    (repo / "vendor" / "lib" / "code.py").write_text("pass\n")
    hand_over(repo)
    out = str(shell(repo).run_raw({"command": "cat vendor/lib/.git/config; cat vendor/lib/code.py"
                                              "; mv vendor/lib/.git moved; ls -a vendor/lib"}))
    assert "NESTED-SECRET" not in out and "pass" in out
    assert (nested / "config").read_text() == "[core]\n\tfsmonitor = NESTED-SECRET\n"


@pytest.fixture(params=[BubblewrapSandbox, LandlockSandbox], ids=["bubblewrap", "landlock"])
def backend(request: pytest.FixtureRequest) -> Sandbox:
    return request.param()  # type: ignore[no-any-return]


def test_git_operations_runs_no_program_the_repository_configuration_names(
        repo: Path, backend: Sandbox) -> None:
    """The repository's config (here through an include) names programs for every operation:
    fsmonitor, pager, signing, signature display. None runs, under either backend."""
    (repo / "extra.cfg").write_text(
        '[core]\n\tfsmonitor = "touch ran-fsmonitor; false"\n\tpager = touch ran-pager\n'
        "[commit]\n\tgpgSign = true\n[gpg]\n\tprogram = touch ran-gpg\n"
        "[log]\n\tshowSignature = true\n[diff]\n\texternal = touch ran-diff\n")
    with (repo / ".git" / "config").open("a") as config:
        config.write("[include]\n\tpath = ../extra.cfg\n")
    (repo / "hello.txt").write_text("changed\n")
    hand_over(repo)
    tool = git_tool(SecurityPolicy(workspace=repo), sandbox=backend)
    said: list[Any] = [tool.run_raw({"operation": "status"}), tool.run_raw({"operation": "diff"}),
            tool.run_raw({"operation": "add", "args": ["hello.txt"]}),
            tool.run_raw({"operation": "commit", "args": ["-m", "second"]}),
            tool.run_raw({"operation": "log", "args": ["-n", "1"]})]
    assert all("[exit code 0]" in text for text in said), said
    assert "second" in said[-1]
    assert not [p.name for p in repo.iterdir() if p.name.startswith("ran-")]
    assert "ran-" not in "".join(said)


def test_git_operations_refuses_a_repository_whose_commondir_points_elsewhere(
        repo: Path, marker: Path) -> None:
    """git's ref store follows ``.git/commondir`` whatever ``GIT_COMMON_DIR`` says."""
    evil = repo / "evil"
    evil.mkdir()
    subprocess.run(["cp", "-r", str(repo / ".git" / "objects"), str(repo / ".git" / "refs"),
                    str(evil)], check=True, timeout=60)
    (evil / "config").write_text(_evil_config(marker))
    (repo / ".git" / "commondir").write_text("../evil\n")
    hand_over(repo)
    with pytest.raises(PolicyViolationError, match=r"\.git/commondir"):
        git_tool(SecurityPolicy(workspace=repo), sandbox=BubblewrapSandbox()).run_raw(
            {"operation": "status"})
    assert not marker.exists()


def test_git_operations_writes_only_the_repositorys_data(repo: Path) -> None:
    """What git writes reaches the workspace — objects, refs, logs, index, HEAD — and nothing
    of its configuration, even where git itself would write it."""
    tool = git_tool(SecurityPolicy(workspace=repo), sandbox=BubblewrapSandbox())
    config_before = (repo / ".git" / "config").read_text()
    (repo / "new.txt").write_text("new\n")
    hand_over(repo)
    tool.run_raw({"operation": "add", "args": ["new.txt"]})
    out = str(tool.run_raw({"operation": "commit", "args": ["-m", "add new"]}))
    assert "[exit code 0]" in out and "refused" not in out, out
    shown = subprocess.run(["git", "-c", "safe.directory=*", "-C", str(repo), "log", "--oneline"],
                           capture_output=True, text=True, check=True, timeout=60).stdout
    assert "add new" in shown  # the person's git sees the commit
    assert (repo / ".git" / "config").read_text() == config_before


def test_git_operations_refuses_a_git_file_that_points_elsewhere(repo: Path, reachable: Path
                                                                 ) -> None:
    elsewhere = reachable / "elsewhere.git"
    os.rename(repo / ".git", elsewhere)
    (repo / ".git").write_text(f"gitdir: {elsewhere}\n")
    with pytest.raises(PolicyViolationError, match="not a directory"):
        git_tool(SecurityPolicy(workspace=repo), sandbox=BubblewrapSandbox()).run_raw(
            {"operation": "status"})


def test_a_bare_repository_a_command_makes_never_makes_the_persons_git_run_a_program(
        repo: Path, marker: Path) -> None:
    # git takes any folder holding HEAD, objects/ and refs/ for a repository, and runs what its
    # config says (an alias, a pager, hooks) when the person uses git there
    config = f"[core]\\n\\tbare = false\\n\\tworktree = ..\\n[alias]\\n\\tst = !touch {marker}\\n"
    out = str(shell(repo).run_raw({"command": (
        "mkdir -p sub/objects sub/refs/heads sub/hooks && echo 'ref: refs/heads/main' > "
        f"sub/HEAD && printf '{config}' > sub/config && echo x > sub/a.txt")}))
    assert not (repo / "sub" / "HEAD").exists()
    assert "sub/HEAD (rule security.forbidden_paths 'HEAD')" in out
    assert (repo / "sub" / "a.txt").read_text() == "x\n"  # the rest of the run is applied
    subprocess.run(["git", "-c", "safe.directory=*", "st"], cwd=repo / "sub",
                   capture_output=True, timeout=60, check=False)
    assert not marker.exists(), "the person's git ran the planted repository's alias"


def test_a_symlink_named_like_a_protected_folder_is_not_applied(repo: Path) -> None:
    # `.claude/*` protects what is inside `.claude`: a link of that name to a folder the
    # command filled would make that folder's files Claude Code's settings (its hooks run)
    with_ln = shell_tool(SecurityPolicy(workspace=repo, autonomy="full",
                                        allowed_commands=(*DEFAULT_COMMANDS, "ln")),
                         sandbox=BubblewrapSandbox())
    out = str(with_ln.run_raw({"command": (
        "mkdir -p cl docs && echo '{\"hooks\": {}}' > cl/settings.json && echo x > docs/en.toml"
        " && ln -s cl .claude && ln -s docs tool_descriptions && ln -s cl .vscode && echo done")}))
    assert "done" in out
    for name in (".claude", "tool_descriptions", ".vscode"):
        assert not os.path.lexists(repo / name), name
    assert ".claude (rule security.forbidden_paths '.claude/*')" in out
    assert "tool_descriptions (rule security.forbidden_paths 'tool_descriptions/*')" in out
    assert (repo / "cl" / "settings.json").exists()  # the rest of the run is applied


EDITOR_FILES = {".cursor/mcp.json": '{"mcpServers": {}}', ".gemini/settings.json": "{}",
                ".zed/settings.json": "{}", ".devcontainer/devcontainer.json": "{}",
                ".hg/hgrc": "[hooks]", ".mise.toml": "[hooks]", "mise.toml": "[hooks]",
                "mise.local.toml": "[hooks]", ".config/mise/config.toml": "[hooks]",
                ".npmrc": "script-shell=x", ".yarnrc.yml": "yarnPath: x", "HEAD": "ref: x"}


def test_files_editors_shells_and_package_managers_run_from_never_come_out_of_a_run(
        repo: Path) -> None:
    command = " && ".join(f"mkdir -p sub/$(dirname {path}) && echo '{text}' > sub/{path}"
                          for path, text in EDITOR_FILES.items())
    out = str(shell(repo).run_raw({"command": f"{command} && echo ok > sub/kept.txt"}))
    left = [path for path in EDITOR_FILES if os.path.lexists(repo / "sub" / path)]
    assert left == [], out
    assert (repo / "sub" / "kept.txt").read_text() == "ok\n"
