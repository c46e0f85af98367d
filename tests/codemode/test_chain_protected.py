"""Code mode's workspace mount follows the file tools' rules: protected and forbidden paths
(``.git`` at any depth, ``.envrc``, ``.mcp.json``, toolkeeper's own files, ``toolkeeper.db-*``,
state folders) are hidden from a script, read-only or writable, and what a script writes at one
never reaches the workspace — with the real sandbox, the same cases as
``tests/builtins/test_files.py``."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from toolkeeper import PolicyViolationError, ToolInvoker, tool
from toolkeeper.builtins.policy import SecurityPolicy
from toolkeeper.codemode import ToolChainTool
from toolkeeper.sandbox import LandlockSandbox

from ..workspaces import hand_over

pytestmark = pytest.mark.anyio

SECRETS = {".git/config": "[core]\n\tfsmonitor = GIT-CONFIG-SECRET\n",
           ".git/hooks/pre-commit": "#!/bin/sh\necho HOOK-SECRET\n",
           ".git/HEAD": "ref: HEAD-SECRET\n", "lib/.git/config": "NESTED-GIT-SECRET",
           "state/toolkeeper.db": "DB-SECRET", "state/notes.txt": "STATE-SIBLING-SECRET",
           "toolkeeper.db-wal": "WAL-SECRET", "toolkeeper.toml": "TOML-SECRET",
           ".envrc": "ENVRC-SECRET", "sub/.envrc": "NESTED-ENVRC-SECRET",
           ".mcp.json": "MCP-SECRET", ".claude/settings.json": "CLAUDE-SECRET"}
ATTEMPT = """
import os
def attempt(rel, data=None):
    path = os.path.join(WORKSPACE, rel)
    try:
        if data is None:
            with open(path, 'rb') as f:
                return f.read().decode()
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'a') as f:
            f.write(data)
        return 'wrote'
    except OSError as exc:
        return type(exc).__name__
"""


@tool
def word_count(text: str) -> int:
    """Count words."""
    return len(text.split())


@pytest.fixture
def project() -> Iterator[Path]:
    """A directory the sandbox's unprivileged user can reach and write."""
    with tempfile.TemporaryDirectory() as top:
        os.chmod(top, 0o755)
        path = Path(top) / "project"
        path.mkdir()
        yield path


def _fill(project: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text(text)
    hand_over(project)


def chain(project: Path, **options: object) -> ToolChainTool:
    return ToolChainTool(ToolInvoker([word_count]), workspace=project, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("writable", [False, True], ids=["read-only", "writable"])
async def test_a_script_cannot_read_a_protected_file_of_its_workspace(project: Path,
                                                                     writable: bool) -> None:
    _fill(project, {**SECRETS, "notes.txt": "ordinary notes", "sub/code.py": "pass\n"})
    run = await chain(project, writable=writable).run_chain(
        ATTEMPT + f"result = {{rel: attempt(rel) for rel in {sorted(SECRETS)!r}}}\n"
        "result['notes.txt'] = attempt('notes.txt')\nresult['sub'] = attempt('sub/code.py')\n"
        "result['.git'] = sorted(os.listdir(os.path.join(WORKSPACE, '.git')))")
    assert run.status == "ok", run.output_text
    assert "SECRET" not in str(run.value), run.value
    assert cast(Any, run.value)["notes.txt"] == "ordinary notes" and cast(Any, run.value)["sub"] == "pass\n"
    assert cast(Any, run.value)[".git"] == []
    # a covered file cannot be opened; a covered directory is empty
    assert all(cast(Any, run.value)[rel] in ("PermissionError", "FileNotFoundError") for rel in SECRETS)


TARGETS = [".git/hooks/pre-commit", ".git/config", ".envrc", ".mcp.json", "toolkeeper.toml",
           "toolkeeper.db-wal"]


@pytest.mark.parametrize("target", TARGETS)
async def test_a_script_cannot_change_an_existing_protected_file(project: Path, target: str
                                                                 ) -> None:
    _fill(project, {target: "ORIGINAL\n", "notes.txt": "a\n"})
    run = await chain(project, writable=True).run_chain(
        ATTEMPT + f"result = [attempt({target!r}, 'EVIL\\n'), attempt('notes.txt', 'b\\n')]")
    assert run.status == "ok", run.output_text
    assert cast(Any, run.value)[0] in ("PermissionError", "OSError") and cast(Any, run.value)[1] == "wrote"
    assert (project / target).read_text() == "ORIGINAL\n"
    assert (project / "notes.txt").read_text() == "a\nb\n"


@pytest.mark.parametrize("target", TARGETS)
async def test_what_a_script_writes_at_a_protected_path_never_reaches_the_workspace(
        project: Path, target: str) -> None:
    _fill(project, {"notes.txt": "a\n"})
    run = await chain(project, writable=True).run_chain(
        ATTEMPT + f"result = [attempt({target!r}, 'EVIL\\n'), attempt('notes.txt', 'b\\n')]")
    assert run.status == "ok", run.output_text
    assert cast(Any, run.value)[1] == "wrote"
    assert not (project / target).exists()
    assert "these changes were not applied to the workspace" in run.output_text
    assert (target.split("/")[0] if target.startswith(".git/") else target) in run.output_text
    assert (project / "notes.txt").read_text() == "a\nb\n"


async def test_a_script_cannot_move_a_protected_files_directory_aside(project: Path) -> None:
    _fill(project, {".git/config": "[core]\n", ".git/HEAD": "ref: main\n"})
    run = await chain(project, writable=True).run_chain(
        "import os\nos.chdir(WORKSPACE)\ntry:\n    os.rename('.git', 'moved')\n"
        "    result = 'moved'\nexcept OSError as exc:\n    result = type(exc).__name__")
    assert run.value == "OSError", run.value  # EBUSY: a mount point stays where it is
    assert (project / ".git" / "config").read_text() == "[core]\n"
    assert not (project / "moved").exists()


async def test_a_planted_symlink_is_removed_and_never_followed(project: Path) -> None:
    outside = project.parent / "other-repo" / ".git"
    (outside / "hooks").mkdir(parents=True)
    (outside / "config").write_text("[core]\n")
    _fill(project, {})
    run = await chain(project, writable=True).run_chain(
        f"import os\nos.symlink({str(outside)!r}, os.path.join(WORKSPACE, '.git'))\nresult = 1")
    assert run.value == 1, run.output_text
    assert not (project / ".git").is_symlink() and not (project / ".git").exists()
    assert (outside / "config").read_text() == "[core]\n" and (outside / "hooks").is_dir()


async def test_the_security_policy_given_decides_what_is_protected(project: Path) -> None:
    _fill(project, {"secrets/key.txt": "KEY-SECRET", ".envrc": "ENVRC-OPEN"})
    policy = SecurityPolicy(workspace=project, forbidden_paths=("secrets",))
    run = await chain(project, security=policy).run_chain(
        ATTEMPT + "result = [attempt('secrets/key.txt'), attempt('.envrc')]")
    assert run.value == ["FileNotFoundError", "ENVRC-OPEN"], run.output_text  # an empty dir


async def test_a_warm_sandbox_started_before_a_protected_file_existed_is_not_used(
        project: Path) -> None:
    _fill(project, {})
    warm = chain(project, warm=1)
    warm.warm_up()
    (project / ".git").mkdir()
    (project / ".git" / "config").write_text("LATE-SECRET")
    try:
        run = await warm.run_chain(ATTEMPT + "result = attempt('.git/config')")
    finally:
        warm.close()
    assert run.value == "FileNotFoundError", run.value  # all of .git is covered
    assert (project / ".git" / "config").read_text() == "LATE-SECRET"  # the host's stays


async def test_under_landlock_a_mount_with_protected_files_is_refused_in_one_line(
        project: Path) -> None:
    _fill(project, {".git/config": "[core]\n\tfsmonitor = GIT-CONFIG-SECRET\n"})
    with pytest.raises(PolicyViolationError) as refused:
        await chain(project, sandbox=LandlockSandbox()).run_chain(
            ATTEMPT + "result = attempt('.git/config')")
    message = str(refused.value)
    assert "\n" not in message and ".git in " in message
    assert "security.forbidden_paths" in message and "bubblewrap" in message


async def test_under_landlock_what_a_script_creates_at_a_protected_path_is_removed(
        project: Path) -> None:
    _fill(project, {"notes.txt": "a\n"})
    run = await chain(project, sandbox=LandlockSandbox(), writable=True).run_chain(
        ATTEMPT + "result = [attempt('.envrc', 'EVIL'), attempt('notes.txt', 'b\\n')]")
    assert run.value == ["wrote", "wrote"], run.output_text
    assert not (project / ".envrc").exists() and "(.envrc)" in run.output_text
    assert (project / "notes.txt").read_text() == "a\nb\n"


async def test_a_git_file_planted_to_point_git_elsewhere_never_reaches_the_workspace(
        project: Path) -> None:
    """``.git`` as a file (``gitdir: evil``) would make git read ``evil/config``: ``.git`` is
    protected at any depth, as a directory or a file."""
    _fill(project, {})
    run = await chain(project, writable=True).run_chain(
        "import os\nos.chdir(WORKSPACE)\nos.makedirs('evil/hooks')\n"
        "open('evil/config', 'w').write('[core]\\n\\tfsmonitor = touch /tmp/pwned\\n')\n"
        "open('.git', 'w').write('gitdir: evil\\n')\nresult = 1")
    assert run.value == 1, run.output_text
    assert not (project / ".git").exists()
    assert ".git (rule security.forbidden_paths '.git')" in run.output_text


async def test_a_protected_file_the_host_saves_during_a_run_is_kept(project: Path) -> None:
    """Hidden, the file was out of the script's reach: a new inode after the run is the
    host's own save (an editor's rename), never removed as the script's."""
    _fill(project, {".envrc": "export A=1\n"})

    @tool
    def save_envrc() -> str:
        """The person edits .envrc on the host while the script runs."""
        (project / ".envrc.new").write_text("export A=2\n")
        (project / ".envrc.new").rename(project / ".envrc")
        return "saved"

    chained = ToolChainTool(ToolInvoker([save_envrc]), workspace=project, writable=True)
    run = await chained.run_chain("result = save_envrc().text")
    assert run.value == "saved", run.output_text
    assert (project / ".envrc").read_text() == "export A=2\n"
    assert "removed" not in run.output_text


async def test_a_protected_path_a_script_writes_is_never_in_the_workspace_even_during_the_run(
        project: Path) -> None:
    """Refused when created, not removed after: while the script still runs, the host finds
    none of what it wrote at a protected path (a tool the script calls looks)."""
    _fill(project, {"notes.txt": "a\n"})
    planted = [".mcp.json", ".vscode/settings.json", ".envrc", "lib/.git/config"]

    @tool
    def look() -> list[str]:
        """What of the planted paths the host's workspace holds right now."""
        return [rel for rel in planted if os.path.lexists(project / rel)]

    chained = ToolChainTool(ToolInvoker([look]), workspace=project, writable=True)
    run = await chained.run_chain(
        ATTEMPT + f"wrote = [attempt(rel, 'EVIL') for rel in {planted!r}]\n"
        "result = [wrote, look().structured]")
    assert run.status == "ok", run.output_text
    assert cast(Any, run.value)[0] == ["wrote"] * 4  # the script's own view took the writes …
    assert cast(Any, run.value)[1] == {"result": []}  # … and the workspace never held them
    assert not any(os.path.lexists(project / rel) for rel in planted)
    for rel in (".mcp.json", ".vscode", ".envrc", "lib/.git"):
        assert rel in run.output_text


async def test_a_commondir_a_script_writes_never_makes_the_persons_git_run_a_program(
        project: Path) -> None:
    marker = project.parent / "a-program-ran"
    subprocess.run(["git", "init", "-q", str(project)], check=True, timeout=60)
    _fill(project, {"notes.txt": "a\n"})
    config = f'[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "touch {marker}; false"\n'
    run = await chain(project, writable=True).run_chain(
        "import os, shutil\nos.chdir(WORKSPACE)\n"
        "for part in ('objects', 'refs'):\n"
        "    try:\n        shutil.copytree('.git/' + part, 'evil/' + part)\n"
        "    except OSError:\n        os.makedirs('evil/' + part, exist_ok=True)\n"
        f"open('evil/config', 'w').write({config!r})\n"
        "try:\n    open('.git/commondir', 'w').write('../evil\\n')\n    result = 'planted'\n"
        "except OSError as exc:\n    result = type(exc).__name__")
    assert run.status == "ok", run.output_text
    assert not (project / ".git" / "commondir").exists()
    subprocess.run(["git", "-c", "safe.directory=*", "status"], cwd=project, capture_output=True,
                   timeout=60, check=False)
    assert not marker.exists(), "the person's git status ran the planted fsmonitor"
