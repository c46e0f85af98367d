"""The type checker reads the tests as well as the code, and every ``type: ignore`` comment names
the error it silences: a bare one would hide any error on its line, today's and tomorrow's."""

from __future__ import annotations

import io
import re
import tokenize
import tomllib
from collections.abc import Iterator
from pathlib import Path

from .test_layers import ROOT

_IGNORE = re.compile(r"#\s*type:\s*ignore\b(?!\[[a-z-]+(?:,\s*[a-z-]+)*\])")


def bare_ignores(source: str) -> Iterator[int]:
    """The lines of ``source`` whose comment is a ``type: ignore`` without an error code."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and _IGNORE.search(token.string):
            yield token.start[0]


def _python_files() -> Iterator[Path]:
    for folder in ("src", "tests"):
        yield from (ROOT / folder).rglob("*.py")


def test_every_type_ignore_names_its_error_code() -> None:
    bare = [f"{path.relative_to(ROOT)}:{line}" for path in _python_files()
            for line in bare_ignores(path.read_text())]
    assert bare == [], "name the code mypy reports, e.g. '# type: ignore[arg-type]'"


def test_the_finder_tells_a_bare_ignore_from_one_with_its_code() -> None:
    source = ('a = 1  # type: ignore\n'
              'b = 2  # type: ignore[arg-type]\n'
              'c = 3  # type:ignore  # spaced differently\n'
              'd = 4  # type: ignore[union-attr, index]\n'
              'e = "# type: ignore"\n'
              'f = 5  # type: ignore[]\n')
    assert list(bare_ignores(source)) == [1, 3, 6]


def test_mypy_checks_the_tests_and_reports_unused_ignores() -> None:
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert mypy.get("strict") is True and mypy.get("warn_unused_ignores") is True
    assert set(mypy["files"]) == {"src/toolkeeper", "tests"}
    # only another project's published tests, kept as written, are left out
    assert mypy["exclude"] == ["^tests/compat/test_published_.*\\.py$"]
