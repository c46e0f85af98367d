"""The README's first command: ``make run`` starts ``toolkeeper serve`` on its embedded defaults
(the example tools and the built-ins over a scratch workspace); ``make check ARGS=...`` prints
the declarations even when the lint finds warnings."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from ..processes import readable

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(sys.prefix)


@pytest.fixture(autouse=True)
def _make() -> None:
    if shutil.which("make") is None:
        pytest.fail("make is not installed (the README's commands need it)")


def test_make_run_serves_the_example_tools_and_the_built_ins(tmp_path: Path) -> None:
    env = {**os.environ, "TOOLKEEPER_TOKEN": "make-run-test-token"}
    proc = subprocess.Popen(
        ["make", "-s", "-C", str(ROOT), "-o", f"{VENV}/.serve", "run", f"VENV={VENV}", "PORT=0",
         f"STATE={tmp_path / 'state'}", f"WORKSPACE={tmp_path / 'workspace'}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=env, start_new_session=True)
    try:
        assert proc.stdout is not None
        ready = readable([proc.stdout], 90)
        line = proc.stdout.readline() if ready else ""
        assert line.startswith("toolkeeper serving on http://127.0.0.1:"), line
        url = line.split()[3]
        health = httpx.get(f"{url}/healthz", timeout=10).json()
        assert health["status"] == "ok" and health["tools"] >= 9  # 2 examples + 7 built-ins
        assert (tmp_path / "workspace").is_dir()
        assert (tmp_path / "state" / ".toolkeeper-state").is_file()  # marked as state
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=30)


def test_make_run_keeps_its_state_out_of_the_project_folder(tmp_path: Path) -> None:
    """A desktop client's entry installed in this folder makes it a workspace: make run's
    tokens must not be in it."""
    env = {k: v for k, v in os.environ.items() if k != "XDG_STATE_HOME"}
    result = subprocess.run(["make", "-n", "-s", "-C", str(ROOT), "-o", f"{VENV}/.serve", "run",
                             f"VENV={VENV}"], capture_output=True, text=True, check=True,
                            env={**env, "HOME": str(tmp_path)}, timeout=60)
    serve = next(line for line in result.stdout.splitlines() if " serve " in line).split()
    state = Path(serve[serve.index("--state-dir") + 1].strip('"'))
    workspace = (ROOT / serve[serve.index("--workspace") + 1]).resolve()
    assert state.is_absolute() and ROOT not in state.parents, state
    assert tmp_path in state.parents  # the user's own state directory
    assert state not in workspace.parents and workspace != state


def test_make_check_prints_the_declarations_when_the_lint_warns(tmp_path: Path) -> None:
    module = tmp_path / "warned.py"
    module.write_text('from toolkeeper import tool\n\n\n@tool\ndef tally(counts: dict[str, int]) -> int:'
                      '\n    """Add up counts per name."""\n    return sum(counts.values())\n')
    result = subprocess.run(
        ["make", "-s", "-C", str(ROOT), "-o", f"{VENV}/.core", "check", f"VENV={VENV}",
         f"ARGS={module}"], capture_output=True, text=True, check=False, timeout=120)
    assert " 1 warning(s)" in result.stdout  # the lint ran and warned (exit status 1)...
    declaration = json.loads(result.stdout[result.stdout.index("\n{") + 1:])
    assert declaration["function"]["name"] == "tally"  # ...and the job went on
    assert result.returncode == 0, result.stderr


def _first_run(tmp_path: Path, makefile: Path = ROOT / "Makefile") -> subprocess.Popen[str]:
    """``make run`` on a machine where .venv is not installed yet: a fresh VENV folder whose
    python and toolkeeper are this environment's, the install step itself skipped (PIP=true:
    pip's own output is not what is checked here)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(VENV / "bin" / "python")
    (venv / "bin" / "toolkeeper").symlink_to(VENV / "bin" / "toolkeeper")
    env = {**os.environ, "TOOLKEEPER_TOKEN": "make-run-test-token"}
    return subprocess.Popen(
        ["make", "-f", str(makefile), "-C", str(ROOT), "run", f"VENV={venv}", "PIP=true",
         "PORT=0", f"STATE={tmp_path / 'state'}", f"WORKSPACE={tmp_path / 'workspace'}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True)


def _lines_until_serving(proc: subprocess.Popen[str]) -> list[str]:
    """stdout's lines up to serve's first one (90 s at most), or what came before it ended."""
    assert proc.stdout is not None
    seen: list[str] = []
    while not seen or not seen[-1].startswith("toolkeeper serving on"):
        ready = readable([proc.stdout], 90)
        line = proc.stdout.readline() if ready else ""
        if not line:
            proc.kill()
            pytest.fail(f"make run did not start serving; stdout so far: {seen}; stderr: "
                        f"{proc.communicate(timeout=30)[1]}")
        seen.append(line.rstrip("\n"))
    return seen


def test_make_run_says_what_it_installs_and_ctrl_c_stops_it_without_an_error(
        tmp_path: Path) -> None:
    proc = _first_run(tmp_path)
    try:
        before = _lines_until_serving(proc)
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole group
    _, stderr = proc.communicate(timeout=60)
    assert any(line.startswith("installing toolkeeper and its serve extras into ")
               and "first run only" in line for line in before), before
    assert "Error" not in stderr and "Interrupt" not in stderr, stderr
    assert proc.returncode in (0, -signal.SIGINT), (proc.returncode, stderr)


def test_make_run_passes_sigterm_on_to_serve_and_ends_without_an_error(tmp_path: Path) -> None:
    """A supervisor stops ``make run`` with SIGTERM to make alone: serve stops too."""
    proc = _first_run(tmp_path)
    try:
        _lines_until_serving(proc)
    finally:
        proc.send_signal(signal.SIGTERM)  # to make only, not to its group
    _, stderr = proc.communicate(timeout=60)
    assert "Error" not in stderr, stderr
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        pass  # nothing of the group is left: serve ended with make
    else:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("serve outlived make run after SIGTERM")


def test_make_run_starts_serve_with_sigint_not_ignored(tmp_path: Path) -> None:
    """The recipe starts serve in the background of its shell, which would start it with
    SIGINT ignored (a Ctrl-C before serve takes the signal would be lost). A stand-in for the
    command reports the signals it started with ignored."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(VENV / "bin" / "python")
    stand_in = venv / "bin" / "toolkeeper"
    stand_in.write_text("#!/bin/sh\ngrep SigIgn /proc/self/status\n")
    stand_in.chmod(0o755)
    done = subprocess.run(
        ["make", "-s", "-C", str(ROOT), "run", f"VENV={venv}", "PIP=true",
         f"STATE={tmp_path / 'state'}", f"WORKSPACE={tmp_path / 'workspace'}"],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("SigIgn:")]
    ignored = int(line.split()[1], 16)
    assert not ignored & (1 << (signal.SIGINT - 1)), line
