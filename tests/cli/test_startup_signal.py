"""A Ctrl-C that comes while the toolkeeper command is still loading its modules is held and
acted on once the command can take it, never dropped by Python's import machinery."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

# The process is launched as ``python -m toolkeeper.cli`` names itself while Python imports the
# module's packages ("-m"), and its SIGINT arrives in the middle of the package's imports.
LOADING = textwrap.dedent("""
    import os, signal, sys
    sys.argv = ["-m"]
    import toolkeeper.startup
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the rest of the package loads
    import toolkeeper
    sys.argv = ["toolkeeper", *ARGS]
    from toolkeeper.cli.entry import main
    main()
""")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    code = LOADING.replace("ARGS", repr(list(args)))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)


def test_a_ctrl_c_while_the_command_loads_ends_it_with_130_quietly() -> None:
    done = _run("--help")
    assert done.returncode == 130, (done.returncode, done.stderr[-2000:])
    assert "Usage" not in done.stdout  # the command did not go on as if nothing happened
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr


def test_serve_does_not_start_after_a_ctrl_c_while_it_loaded(tmp_path: Path) -> None:
    done = _run("serve", "--no-builtins", "--port", "0", "--state-dir", f"{tmp_path}/state")
    assert done.returncode == 130, (done.returncode, done.stderr[-2000:])
    assert "serving" not in done.stdout and "Traceback" not in done.stderr


def test_importing_toolkeeper_as_a_library_leaves_sigint_alone() -> None:
    code = ("import signal, toolkeeper; "
            "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.strip() == "True"
