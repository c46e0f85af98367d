"""Globs as matchers of whole workspace-relative paths, in time linear in the path's length.

``compile_glob`` turns ``glob_search``'s ``pattern`` and ``content_search``'s ``glob`` into a
``Glob``. Globs whose regular expression backtracks boundedly keep Python's ``re``; every other
glob runs on its automaton (positions as the bits of an int, all advanced per character), read
through a deterministic automaton built lazily from the sets of positions the paths reach, with
a bounded number of states and transitions; past the bound the bit-parallel step goes on alone.
A path without the glob's longest literal run is refused before either is read.
"""

from __future__ import annotations

import re
from typing import TypeAlias

from ..errors import InvalidArgumentsError

__all__ = ["MAX_GLOB", "MAX_STATES", "MAX_TRANSITIONS", "Glob", "compile_glob"]

MAX_GLOB = 4096
"""Characters a glob may have (``glob_search``'s ``pattern``, ``content_search``'s ``glob``)."""
MAX_STATES = 1024
"""States a ``Glob``'s deterministic automaton keeps at most (each a set of positions)."""
MAX_TRANSITIONS = 16384
"""Transitions (state, character) a ``Glob``'s deterministic automaton keeps at most."""

_QUANTIFIERS = frozenset({"*", "**", "**/"})
_REGEX = {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}


def compile_glob(pattern: str, tool: str = "glob_search") -> Glob:
    """The glob as a matcher of whole workspace-relative paths: ``**/`` matches any number of
    directories, ``**`` anything, ``*`` and ``?`` stay inside one path part, every other
    character is itself. Refuses a glob longer than ``MAX_GLOB`` characters."""
    if len(pattern) > MAX_GLOB:
        raise InvalidArgumentsError(
            f"the glob is {len(pattern)} characters, more than the {MAX_GLOB} a glob may have; "
            "use a shorter one (\"**/name\" finds a name at any depth)", tool_name=tool)
    return Glob(_simplified(_tokens(pattern)))


def _tokens(pattern: str) -> list[str]:
    """``**/``, ``**``, ``*``, ``?`` or one literal character each, read left to right."""
    out, i = [], 0
    while i < len(pattern):
        token = ("**/" if pattern.startswith("**/", i) else "**" if pattern.startswith("**", i)
                 else pattern[i])
        out.append(token)
        i += len(token)
    return out


def _simplified(tokens: list[str]) -> list[str]:
    """The same language with fewer quantifiers: ``**/**/`` is ``**/``, ``****`` is ``**``, and
    ``**`` beside ``**/`` is ``**``. (``**`` and ``**/`` never cross a newline, ``*`` does, so
    ``**`` beside ``*`` stays as it is.) A ``*`` is never followed by a quantifier, so a run of
    adjacent quantifiers becomes ``*``, ``**``, ``**/``, ``** *`` or ``**/ *``."""
    out: list[str] = []
    for token in tokens:
        if token in ("**", "**/") and out and out[-1] in ("**", "**/"):
            out[-1] = token if token == out[-1] else "**"
        else:
            out.append(token)
    return out


def _backtracks_boundedly(tokens: list[str]) -> bool:
    """Whether Python's regular expression for these (simplified) tokens takes O(n * m) steps
    at most on a path of n characters, m the count of tokens.

    A quantifier is *settled* when one length at most lets the match go on: a ``*`` before a
    literal ``/`` (it must stop at the first ``/``) or the last token (it must reach the end);
    its other lengths fail at the next step, so what follows it is tried once. The engine tries
    each length of an unsettled one, n + 1 at most, against all that follows it. So the
    expression is safe with no unsettled quantifier; or with one that no quantifier follows
    (each try O(m)); or with a first one that is ``**/`` followed by ``*`` only, none of them
    unsettled but the last ("**/*.py", "**/src/*/*_test.go", "**/*"): what follows is tried after each
    ``/`` the ``**/`` can end at, each of its ``*`` reads a path part that it reads for one of
    these tries at most, and the last one's tries are O(m) each, so the whole is O(n * m).
    Any other glob (``*a*a*a...`` takes exponential time) is matched by its automaton."""
    quantifiers = [i for i, token in enumerate(tokens) if token in _QUANTIFIERS]
    unsettled = [i for i in quantifiers if not (
        i == len(tokens) - 1 or (tokens[i] == "*" and tokens[i + 1] == "/"))]
    if not unsettled or unsettled[0] == quantifiers[-1]:
        return True
    return (tokens[unsettled[0]] == "**/" and len(unsettled) <= 2
            and unsettled[-1] in (unsettled[0], quantifiers[-1])
            and all(tokens[i] == "*" for i in quantifiers if i > unsettled[0]))


class Glob:
    """A compiled glob: ``match(path)`` says whether the whole path matches it.

    Globs whose regular expression backtracks boundedly (the common ones: "**/*.py",
    "src/*.md", "*_test.go", "docs/**") keep Python's ``re``; any other ("**/*test*",
    "*a*a*a...", on which ``re`` is exponential) is read by ``_Dfa``: one dictionary look-up
    per character once the states it needs are built, and never more than the bit-parallel
    step of ``_Automaton`` (O(m / word size) per character) while they are not; a path
    without the glob's longest literal run (``_needle``) is refused first. So a path of n
    characters costs O(n * m / word size) at most, O(n) once the states are built."""

    __slots__ = ("_automaton", "_dfa", "_needle", "_regex")

    def __init__(self, tokens: list[str]) -> None:
        self._regex = (re.compile("".join(_REGEX.get(t) or re.escape(t) for t in tokens)
                                  + r"\Z") if _backtracks_boundedly(tokens) else None)
        self._automaton = _Automaton(tokens)
        self._dfa = _Dfa(self._automaton)
        self._needle = _needle(tokens)

    def match(self, path: str) -> bool:
        """Whether the whole of ``path`` matches the glob."""
        if self._regex is not None:
            return self._regex.match(path) is not None
        return self._needle in path and self._dfa.match(path)

    def _simulate(self, path: str) -> bool:
        """The answer of the bit-parallel automaton alone (what ``match`` gave before the
        deterministic automaton; the tests hold the two to each other)."""
        return self._automaton.run(self._automaton.start, path)


def _needle(tokens: list[str]) -> str:
    """The glob's longest run of literal characters ("" when it has none): a path that
    matches holds it somewhere, so one without it is refused by a scan in C ("test" in
    "**/*test*"), without reading it character by character."""
    runs, run = [], ""
    for token in tokens:
        if token in _QUANTIFIERS or token == "?":
            runs.append(run)
            run = ""
        else:
            run += token
    return max([*runs, run], key=len)


class _Automaton:
    """The glob's automaton, simulated on the set of positions reached, held as the bits of
    an int and advanced all at once per character: O(n * m / word size) whatever the glob."""

    __slots__ = ("_advance", "_advance_other", "_epsilon", "_skip", "_stay", "_stay_other",
                 "accept", "start")

    def __init__(self, tokens: list[str]) -> None:
        # The positions: one per element; "**/" is three (a skip over the rest, "**", "/").
        # An element is a literal character, "?" (one character but "/"), "*" (stays on any
        # but "/"), "**" (stays on any).
        elements: list[str] = []
        for token in tokens:
            elements += ["skip", "**", "/"] if token == "**/" else [token]
        bits = {kind: sum(1 << i for i, e in enumerate(elements) if e == kind)
                for kind in ("skip", "**", "*", "?")}
        literal: dict[str, int] = {}
        for i, element in enumerate(elements):
            if element not in bits:
                literal[element] = literal.get(element, 0) | 1 << i
        # per character: the positions that move on a step ("?" on any but "/"), and the
        # positions that stay ("**" on any but a newline, as the regular expression's ".*")
        self._advance = {c: mask | (bits["?"] if c != "/" else 0) for c, mask in literal.items()}
        self._advance.setdefault("/", 0)
        self._advance_other = bits["?"]
        self._stay = {"/": bits["**"], "\n": bits["*"]}
        self._stay_other = bits["**"] | bits["*"]
        # steps taken without a character: from "*", "**" and a skip to the next position, and
        # from a skip over its "**" and "/"
        self._epsilon = bits["skip"] | bits["**"] | bits["*"]
        self._skip = bits["skip"]
        self.accept = 1 << len(elements)
        self.start = self._closed(1)

    def step(self, reached: int, c: str) -> int:
        """The positions reached from ``reached`` by reading ``c``."""
        return self._closed((reached & self._advance.get(c, self._advance_other)) << 1
                            | (reached & self._stay.get(c, self._stay_other)))

    def run(self, reached: int, path: str) -> bool:
        """Whether reading ``path`` from ``reached`` ends on the accepting position."""
        advance, advance_other, stay, stay_other = (self._advance, self._advance_other,
                                                    self._stay, self._stay_other)
        for c in path:
            reached = self._closed((reached & advance.get(c, advance_other)) << 1
                                   | (reached & stay.get(c, stay_other)))
            if not reached:
                return False
        return bool(reached & self.accept)

    def _closed(self, reached: int) -> int:
        """``reached`` with every position a step without a character leads to. Adding the
        positions inside runs of such steps to the runs carries each through to the run's end
        and one past it (the bits that changed); a skip goes three on. Simplified tokens hold
        at most one skip in a run, so this loops at most twice."""
        epsilon, skip = self._epsilon, self._skip
        while True:
            reached |= (epsilon + (reached & epsilon)) ^ epsilon
            more = reached | (reached & skip) << 3
            if more == reached:
                return reached
            reached = more


_Row: TypeAlias = "dict[str, _Row]"
_ACCEPTS = ""
"""The key an accepting state's row holds (no character of a path is the empty string)."""


class _Dfa:
    """A deterministic automaton over ``_Automaton``'s sets of positions, built as paths need
    its states.

    A state is a row: a dict from a character to the next state's row, holding the key
    ``_ACCEPTS`` when the state accepts, so ``match`` reads a path with one dictionary look-up
    per character. A missing transition is computed by the bit-parallel step and kept while
    fewer than ``max_states`` states and ``max_transitions`` transitions are kept; past that
    bound the rest of the path is read by the bit-parallel step alone, from the set reached.
    So each character costs O(1) on a kept transition and O(m / word size) otherwise, and the
    memory is bounded whatever the glob (``**a`` then 20 ``?`` has 2^20 reachable states).
    The dead state (the empty set: no match is possible any more) keeps no transition, so a
    path that reaches it stops there. Shared between threads it gives the same answers: a race
    at worst builds a row twice (each row's set is right whichever is kept).
    """

    __slots__ = ("_automaton", "_dead", "_max_states", "_max_transitions", "_rows", "_sets",
                 "_start", "_transitions")

    def __init__(self, automaton: _Automaton, *, max_states: int = MAX_STATES,
                 max_transitions: int = MAX_TRANSITIONS) -> None:
        self._automaton = automaton
        self._max_states, self._max_transitions = max_states, max_transitions
        self._rows: dict[int, _Row] = {}
        self._sets: dict[int, int] = {}  # id(row) -> its set (the rows are kept in _rows)
        self._transitions = 0
        self._dead: _Row | None = None
        self._start = self._new_row(automaton.start)

    def match(self, path: str) -> bool:
        """Whether the whole of ``path`` matches, read on the kept transitions while they
        suffice (a ``KeyError`` is a transition not kept yet, or the dead state)."""
        row = self._start
        try:
            for c in path:
                row = row[c]
        except KeyError:
            return row is not self._dead and self._match_building(path)
        return _ACCEPTS in row

    @property
    def size(self) -> tuple[int, int]:
        """The states and transitions kept."""
        return len(self._rows), self._transitions

    def _match_building(self, path: str) -> bool:
        row = self._start
        for i, c in enumerate(path):
            following = row.get(c)
            if following is None:
                following = self._follow(row, c)
                if following is None:  # full: the bit-parallel step reads the rest
                    return self._automaton.run(self._sets[id(row)], path[i:])
            if following is self._dead:
                return False
            row = following
        return _ACCEPTS in row

    def _follow(self, row: _Row, c: str) -> _Row | None:
        """The row ``row`` goes to on ``c``, kept; None when the bound leaves no room."""
        if self._transitions >= self._max_transitions:
            return None
        reached = self._automaton.step(self._sets[id(row)], c)
        following = self._rows.get(reached)
        if following is None:
            if len(self._rows) >= self._max_states:
                return None
            following = self._new_row(reached)
        row[c] = following
        self._transitions += 1
        return following

    def _new_row(self, reached: int) -> _Row:
        row: _Row = {}
        if reached & self._automaton.accept:
            row[_ACCEPTS] = row
        elif not reached:
            self._dead = row
        self._sets[id(row)] = reached
        self._rows[reached] = row
        return row
