"""Every wait the suite makes on a process it started is bounded: ``subprocess.run`` and its
kin take a ``timeout``, and so do ``communicate()`` and a started process's ``wait()``. A wait
past its bound fails naming the command; pytest-timeout (300 s, pyproject.toml) is the last net,
and a test it stops fails with the stack of every thread."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Iterator
from pathlib import Path

from .test_layers import ROOT

RUNS = {"subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output"}


def _started(tree: ast.AST) -> set[str]:
    """The names a module binds to a process it starts (``name = subprocess.Popen(...)``)."""
    return {target.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call) and ast.unparse(node.value.func) == "subprocess.Popen"
            for target in node.targets if isinstance(target, ast.Name)}


def unbounded(source: str) -> Iterator[str]:
    """Each call in ``source`` that waits on a process without a timeout, as ``line: call``."""
    tree = ast.parse(source)
    started = _started(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or any(k.arg == "timeout" for k in node.keywords):
            continue
        func = node.func
        name = ast.unparse(func)
        waits = isinstance(func, ast.Attribute) and not node.args and (
            func.attr == "communicate"
            or (func.attr == "wait" and isinstance(func.value, ast.Name) and func.value.id in started))
        if name in RUNS or waits:
            yield f"{node.lineno}: {name}"


def test_every_wait_on_a_process_in_the_suite_has_a_timeout() -> None:
    found = [f"{path.relative_to(ROOT)}:{where}" for path in sorted((ROOT / "tests").rglob("*.py"))
             for where in unbounded(path.read_text())]
    assert found == [], "pass timeout= (a bound the call cannot outlive on a busy machine)"


def test_the_finder_sees_each_kind_of_unbounded_wait() -> None:
    source = textwrap.dedent("""\
        proc = subprocess.Popen(["sleep", "1"])
        proc.wait()
        proc.wait(timeout=5)
        proc.communicate()
        subprocess.run(["true"], check=True)
        subprocess.run(["true"], check=True, timeout=5)
        event.wait()
        """)
    assert list(unbounded(source)) == ["2: proc.wait", "4: proc.communicate", "5: subprocess.run"]


def test_a_hung_test_fails_at_its_timeout_with_the_stack_of_its_wait(tmp_path: Path) -> None:
    ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert 0 < ini["timeout"] <= 300 and ini.get("timeout_method", "signal") == "signal"
    (tmp_path / "test_hangs.py").write_text(textwrap.dedent("""\
        import subprocess
        import threading

        def test_hangs():
            threading.Thread(target=threading.Event().wait, name="helper", daemon=True).start()
            subprocess.Popen(["sleep", "30"]).wait()
        """))
    ran = subprocess.run([sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"),
                          "--rootdir", str(tmp_path), "-p", "no:cacheprovider", "-o", "timeout=3",
                          str(tmp_path / "test_hangs.py")],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    said = ran.stdout[-4000:]
    assert ran.returncode == 1 and "Failed: Timeout (>3.0s)" in said, said
    assert "test_hangs.py:6" in said and "helper" in said, said  # the test's line, every thread
