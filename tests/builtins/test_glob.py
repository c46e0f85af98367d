"""Globs matched in time bounded by the pattern's and the path's lengths, with the answers the
regular expression they used to be turned into gave; the deterministic automaton read first
gives the bit-parallel one's answers, and its states stay bounded whatever the glob."""

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
from toolkeeper.builtins.globs import MAX_GLOB, MAX_STATES, MAX_TRANSITIONS, _Dfa, compile_glob
from toolkeeper.builtins.policy import SecurityPolicy


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


# wider than above: a character no glob holds ("c", "é") and longer paths, read twice each so
# the second reading runs on the transitions the first one kept
WIDE_PATTERNS = st.lists(st.sampled_from(["*", "**", "**/", "?", "a", "b", "/", "\n", "é"]),
                         max_size=12).map("".join)
WIDE_PATHS = st.lists(st.sampled_from(["a", "b", "c", "/", "\n", "é", "ab", "a/", "bé"]),
                      max_size=16).map("".join)


@settings(max_examples=1000, deadline=None)
@given(pattern=WIDE_PATTERNS, paths=st.lists(WIDE_PATHS, min_size=1, max_size=10),
       states=st.integers(1, 6), transitions=st.integers(0, 20))
def test_the_deterministic_automaton_answers_as_the_bit_parallel_one(
        pattern: str, paths: list[str], states: int, transitions: int) -> None:
    glob = compile_glob(pattern)
    # the glob's own (bounds far away) and one so small that paths run past it mid-way
    bounded = _Dfa(glob._automaton, max_states=states, max_transitions=transitions)
    for path in paths * 2:
        expected = glob._simulate(path)
        assert glob._dfa.match(path) is expected
        assert bounded.match(path) is expected
        assert glob.match(path) is expected  # the regular expression, or the needle then the DFA
    assert bounded.size[0] <= states
    assert bounded.size[1] <= transitions


def test_globs_with_two_stars_in_a_part_are_read_by_the_deterministic_automaton() -> None:
    glob = compile_glob("**/*test*")
    assert glob._regex is None
    assert [glob.match(p) for p in ("src/test_a.py", "a/b/latest.md", "tests/x.py", "x")] == [
        True, True, False, False]
    states, transitions = glob._dfa.size
    assert transitions > 0
    assert glob._dfa.match("tests/x.py") is False  # now on kept transitions only
    assert glob._dfa.size == (states, transitions)


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


@pytest.mark.parametrize(("pattern", "needle"), [
    ("**/*test*", "test"), ("*a?bc*", "bc"), ("**/x/*y*z", "x/"), ("src/**/a*b*", "src/"),
    ("**?*", ""), ("*?*?", "")])
def test_a_path_without_the_globs_longest_literal_run_is_refused_before_the_automaton(
        pattern: str, needle: str) -> None:
    glob = compile_glob(pattern)
    assert glob._regex is None
    assert glob._needle == needle
    if needle:
        assert not glob.match("a/" * 20 + needle[:-1])
        assert glob._dfa.size[1] == 0  # nothing was read character by character


def test_a_glob_whose_deterministic_automaton_is_exponential_keeps_its_bounds() -> None:
    # "**a" then k "?" then "/**": the deterministic automaton remembers where each "a" of the
    # last k characters was, 2^k states; paths of "a" and "b" reach a new one at almost every
    # character. Its states and transitions stop at their bounds, and the bit-parallel step
    # reads on: the answers stay the same, the memory bounded (and within the child's minute).
    # The third glob has three states but meets 40,000 different characters.
    code = f"""if True:
        import random, tracemalloc
        from toolkeeper.builtins.search import compile_glob
        rng = random.Random(7)
        cases = [
            ("**a" + "?" * 20 + "/**",
             ["".join(rng.choice("ab") for _ in range(400)) + "/x" for _ in range(300)]),
            ("**a" + "?" * {MAX_GLOB - 6} + "/**",
             ["".join(rng.choice("ab") for _ in range({MAX_GLOB - 2})) + "/x" for _ in range(8)]),
            ("*a*b*", ["ab" + "".join(map(chr, range(0x4e00 + i * 1000, 0x4e00 + (i + 1) * 1000)))
                       for i in range(40)]),
        ]
        for pattern, paths in cases:
            glob = compile_glob(pattern)
            tracemalloc.start()
            answers = [glob.match(p) for p in paths]
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            states, transitions = glob._dfa.size
            print(glob._regex is None, answers == [glob._simulate(p) for p in paths],
                  states, transitions, peak)"""
    told = [line.split() for line in answered(code)]
    assert [line[:2] for line in told] == [["True", "True"]] * 3  # automata, same answers
    blowup, longest, alphabet = ([int(n) for n in line[2:]] for line in told)
    for states, transitions, _ in (blowup, longest):
        assert states == MAX_STATES
        assert MAX_STATES - 1 <= transitions <= MAX_TRANSITIONS
    assert alphabet[0] <= 4
    assert alphabet[1] == MAX_TRANSITIONS
    assert max(blowup[2], longest[2], alphabet[2]) < 8 * 2**20  # bytes at the peak


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
