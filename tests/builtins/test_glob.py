"""Globs matched in time bounded by the pattern's and the path's lengths, with the answers the
regular expression they used to be turned into gave."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkeeper import InvalidArgumentsError
from toolkeeper.builtins import search as module
from toolkeeper.builtins.policy import SecurityPolicy
from toolkeeper.builtins.search import MAX_GLOB, compile_glob


def reference(pattern: str) -> re.Pattern[str]:
    """The glob's regular expression as search.py built it before: the meaning kept, but
    Python's backtracking takes exponential time on several quantifiers."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


PATTERNS = st.lists(st.sampled_from(["*", "**", "**/", "*/", "?", "a", "b", "/", ".", "\n"]),
                    max_size=8).map("".join)
PATHS = st.lists(st.sampled_from(["a", "b", "/", ".", "\n", "ab", "a/"]), max_size=10).map("".join)


@settings(max_examples=1500, deadline=None)
@given(pattern=PATTERNS, paths=st.lists(PATHS, min_size=1, max_size=6))
def test_a_glob_matches_what_its_old_regular_expression_matched(pattern: str,
                                                                paths: list[str]) -> None:
    glob, old = compile_glob(pattern), reference(pattern)
    for path in paths:
        expected = old.match(path) is not None
        # the matcher as used (the expression where it is safe) and the automaton for every glob
        assert glob.match(path) is expected
        assert glob._simulate(path) is expected


@pytest.mark.parametrize("pattern", ["**/*.py", "*.py", "src/**/*.py", "**/src/*/*_test.go",
                                     "**/*", "docs/**", "src/*.md", "a?b/*.txt"])
def test_common_globs_keep_the_regular_expression(pattern: str) -> None:
    # each has at most one quantifier that backtracks over the path (see _backtracks_boundedly)
    assert compile_glob(pattern)._regex is not None


HOSTILE = [
    ("**/" * 8 + "x", "a/" * 40 + "b", False),  # the old expression: 14 s
    ("**/" * 12 + "x", "a/" * 60 + "b", False),
    ("*a" * 12 + "b", "a" * 60, False),
    ("*a" * 14 + "b", "a" * 100, False),
    ("**a" * 12 + "b", "a/" * 50, False),
    ("**/x/" * 10 + "y", "x/" * 60 + "z", False),
    ("*a" * (MAX_GLOB // 2), "a" * 4096, True),
    ("?*" * (MAX_GLOB // 2), "a/" * 2048, False),
]


def answered(code: str) -> list[str]:
    """The lines ``code`` printed, run in a child process waited for a minute at most (a
    bounded wait on a condition: exponential matching does not end within it). Not a thread:
    Python's regular expressions hold the GIL while they match, so a waiting thread never woke."""
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=60, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    except subprocess.TimeoutExpired:
        pytest.fail("the match did not end within a minute")
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.parametrize(("pattern", "path", "expected"), HOSTILE)
def test_hostile_globs_are_answered(pattern: str, path: str, expected: bool) -> None:
    assert answered(f"""if True:
        from toolkeeper.builtins.search import compile_glob
        glob = compile_glob({pattern!r})
        print(glob.match({path!r}), glob.match({path[:-1] + "x"!r}))""") == [
        f"{expected} {pattern.endswith('x')}"]


def test_a_glob_longer_than_the_limit_is_refused_naming_it() -> None:
    compile_glob("*" * MAX_GLOB)
    with pytest.raises(InvalidArgumentsError, match=f"more than the {MAX_GLOB}.*shorter"):
        compile_glob("*" * (MAX_GLOB + 1))


def test_the_tools_answer_a_hostile_glob(tmp_path: Path) -> None:
    deep = tmp_path.joinpath(*(["a"] * 30))
    deep.mkdir(parents=True)
    (deep / ("a" * 60)).write_text("needle\n")
    (tmp_path / "x.py").write_text("needle\n")
    # content_search filters by the glob itself when neither ripgrep nor grep is there
    assert answered(f"""if True:
        from pathlib import Path
        from toolkeeper.builtins import search
        from toolkeeper.builtins.policy import SecurityPolicy
        tools = {{t.name: t.run_raw for t in search.search_tools(
            SecurityPolicy(workspace=Path({str(tmp_path)!r})))}}
        for pattern in ({"**/" * 12 + "x"!r}, {"*a" * 14 + "b"!r}, {"**a" * 12 + "b"!r},
                        {"**/" + "*a" * 14 + "*"!r}):
            print(tools["glob_search"]({{"pattern": pattern}}))
        search._ripgrep = search._grep = lambda *a: None
        print(tools["content_search"]({{"pattern": "needle", "glob": {"*a" * 14 + "b"!r}}}))
        print(tools["content_search"]({{"pattern": "needle", "glob": {"*a" * 14!r}}}))""") == [
        "no files match", "no files match", "no files match", "/".join(["a"] * 30 + ["a" * 60]),
        "no matches", "/".join(["a"] * 30 + ["a" * 60]) + ":1:needle"]


def test_the_tools_refuse_a_glob_longer_than_the_limit(tmp_path: Path) -> None:
    tools = {t.name: t for t in module.search_tools(SecurityPolicy(workspace=tmp_path))}
    with pytest.raises(InvalidArgumentsError, match=f"{MAX_GLOB}"):
        tools["glob_search"].run_raw({"pattern": "*" * (MAX_GLOB + 1)})
    with pytest.raises(InvalidArgumentsError, match=f"{MAX_GLOB}"):
        tools["content_search"].run_raw({"pattern": "needle", "glob": "*" * (MAX_GLOB + 1)})


def test_a_pattern_that_backtracks_without_end_is_stopped_at_the_time_limit_and_said(
        tmp_path: Path) -> None:
    # content_search's own regular expression, on a line the agent wrote: with re, (a|aa)+$
    # on 60 "a" and a "!" backtracks for longer than the universe's age, holding the
    # interpreter (every other call of the server waits); here it stops at the call's limit.
    # ("aa" makes ripgrep, where present, choose the file; the next line is the trap.)
    (tmp_path / "notes.txt").write_text("aa\n" + "a" * 60 + "!\n")
    (said,) = answered(f"""if True:
        from toolkeeper.builtins.policy import SecurityPolicy
        from toolkeeper.builtins.search import search_tools
        policy = SecurityPolicy(workspace={str(tmp_path)!r}, shell_timeout_s=2)
        tool = {{t.name: t for t in search_tools(policy)}}["content_search"]
        print(repr(str(tool.run_raw({{"pattern": "(a|aa)+$"}}))))""")
    assert "notes.txt:1:aa" in said
    assert "the search was stopped at its time limit (2 s, security.shell_timeout_s)" in said
