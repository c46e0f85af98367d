"""A warning during a test fails it: whatever warns is fixed, or expected where it is provoked on
purpose (``pytest.warns``, a ``filterwarnings`` mark), or ignored by one narrow line of
pyproject.toml that names the library it comes from and says why."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

from .test_layers import ROOT


def _filters() -> list[str]:
    ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    return list(ini["filterwarnings"])


def test_every_warning_is_an_error_but_the_narrow_ignores_listed() -> None:
    filters = _filters()
    assert filters[0] == "error"
    for line in filters[1:]:
        action, message, category, module = [*line.split(":"), "", "", ""][:4]
        assert action == "ignore" and category, line
        # narrow: a message or a module, except ResourceWarning, which Python itself ignores
        assert message or module or category == "ResourceWarning", line


def test_each_ignore_says_why_on_the_line_above() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    block = text[text.index("filterwarnings = ["):]
    block = block[:block.index("\n]") + 2]
    lines = block.splitlines()
    unexplained = [line.strip() for above, line in itertools.pairwise(lines)
                   if re.match(r'\s*"ignore:', line) and not above.strip().startswith("#")]
    assert unexplained == []


def test_a_test_that_warns_fails(tmp_path: Path) -> None:
    (tmp_path / "test_warns.py").write_text(textwrap.dedent("""\
        import warnings

        def test_warns():
            warnings.warn("something is off", UserWarning, stacklevel=1)
        """))
    ran = subprocess.run([sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"),
                          "--rootdir", str(tmp_path), "-p", "no:cacheprovider",
                          str(tmp_path / "test_warns.py")],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert ran.returncode == 1 and "UserWarning: something is off" in ran.stdout, ran.stdout[-2000:]
