"""``glob_search`` and ``content_search``: find files and lines without leaving the workspace.

Both start from a directory fd opened with ``openat2`` and never follow symlinks, nor enter a
forbidden directory (``.git`` at any depth) or a toolkeeper state folder. Content search
asks ripgrep (``--no-config``, ``-e PATTERN``, ``--``, no ``--follow``, no ``--pre``, a clean
environment, a timeout, its output streamed under the cap), else ``grep -r``, which files match;
else it walks every file. The lines it shows are always read again through the one rule set for
reading files (``reading.read_checked``), so search shows nothing ``file_read`` would refuse.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ..core.metadata import ToolMetadata
from ..core.risk import ToolRisk
from ..errors import InvalidArgumentsError
from ..extras import missing
from ..sandbox import run_helper
from ..tools.tool import Tool
from .fs import (
    RESOLVE_BENEATH,
    RESOLVE_NO_MAGICLINKS,
    Workspace,
    _refuse,
    check_not_state,
    openat2,
    visible,
)
from .policy import SecurityPolicy
from .reading import read_text_or_none
from .state_dirs import state_file_in, state_in_names

__all__ = ["MAX_GLOB", "Glob", "compile_glob", "search_tools"]

MAX_WALK = 100_000
_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}


MAX_GLOB = 4096
"""Characters a glob may have (``glob_search``'s ``pattern``, ``content_search``'s ``glob``)."""

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
    Any other glob (``*a*a*a...`` takes exponential time) is matched by ``Glob._simulate``."""
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
    "src/*.md", "*_test.go", "docs/**") keep Python's ``re``; any other runs on a simulation
    of the glob's automaton that holds the set of positions reached as the bits of an int and
    advances all of them per character: O(n * m / word size) whatever the glob (``re`` is
    exponential on "*a" repeated)."""

    __slots__ = ("_accept", "_advance", "_advance_other", "_epsilon", "_regex", "_skip",
                 "_start", "_stay", "_stay_other")

    def __init__(self, tokens: list[str]) -> None:
        self._regex = (re.compile("".join(_REGEX.get(t) or re.escape(t) for t in tokens)
                                  + r"\Z") if _backtracks_boundedly(tokens) else None)
        # The automaton's positions: one per element; "**/" is three (a skip over the rest,
        # "**", "/"). An element is a literal character, "?" (one character but "/"), "*"
        # (stays on any but "/"), "**" (stays on any).
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
        self._accept = 1 << len(elements)
        self._start = self._closed(1)

    def match(self, path: str) -> bool:
        """Whether the whole of ``path`` matches the glob."""
        if self._regex is not None:
            return self._regex.match(path) is not None
        return self._simulate(path)

    def _simulate(self, path: str) -> bool:
        reached = self._start
        advance, advance_other, stay, stay_other = (self._advance, self._advance_other,
                                                    self._stay, self._stay_other)
        for c in path:
            reached = self._closed((reached & advance.get(c, advance_other)) << 1
                                   | (reached & stay.get(c, stay_other)))
            if not reached:
                return False
        return bool(reached & self._accept)

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


def _open_dir(ws: Workspace, rel: str, tool: str, policy: SecurityPolicy) -> int:
    """The directory to search, refused when it is, or is inside, a forbidden path or a
    toolkeeper state folder."""
    try:
        fd = openat2(ws.fd, rel, os.O_RDONLY | os.O_DIRECTORY,
                     resolve=RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
    except OSError as exc:
        raise _refuse(rel, f"it is not a directory inside the workspace ({exc.strerror})",
                      tool) from None
    try:
        real = ws.real_relative(fd)
        if real != ".":
            policy.check_path(real, write=False, tool=tool)
        ws.check_location(fd, real, rel, tool)
        check_not_state(fd, real if real != "." else "", rel, tool)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _walk(dirfd: int, policy: SecurityPolicy, prefix: str = ".") -> Iterator[
        tuple[str, int, str, bool]]:
    """(relative dir, its fd, entry name, is a regular file) without following symlinks, never
    entering a forbidden directory (``.git`` at any depth) or a toolkeeper state folder;
    ``prefix`` is where ``dirfd`` is in the workspace."""
    walked = 0
    for top, dirs, files, fd in os.fwalk(".", dir_fd=dirfd, follow_symlinks=False):
        base = top[2:] if top.startswith("./") else ("" if top == "." else top)
        if state_in_names(files) and state_file_in(fd):
            dirs.clear()
            continue
        inside = base if prefix == "." else (f"{prefix}/{base}" if base else prefix)
        dirs[:] = sorted(d for d in dirs
                         if policy.forbidden_rule(f"{inside}/{d}" if inside else d) is None)
        for name in sorted(files):
            walked += 1
            if walked > MAX_WALK:
                return
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue
            yield base, fd, name, stat.S_ISREG(info.st_mode)


def search_tools(policy: SecurityPolicy) -> list[Tool]:
    """``glob_search`` and ``content_search`` bound to ``policy``."""
    ws = Workspace(policy.workspace)

    def glob_search(pattern: str, path: str = ".", limit: int = 200) -> str:
        """List files whose workspace-relative path matches a glob ("**/*.py", "src/*.md").

        Args:
            pattern: The glob; ** matches any number of directories.
            path: Directory to search in, relative to the workspace.
            limit: How many paths to return at most.
        """
        rel = ws.relative(path, "glob_search")
        matcher = compile_glob(pattern, "glob_search")
        dirfd = _open_dir(ws, rel, "glob_search", policy)
        found: list[str] = []
        try:
            for base, _, name, _ in _walk(dirfd, policy, rel):
                inner = f"{base}/{name}" if base else name
                full = inner if rel == "." else f"{rel}/{inner}"
                if (matcher.match(inner) or matcher.match(full)) and not policy.forbidden_rule(full):
                    found.append(visible(_printable(full)))
                    if len(found) > limit:
                        break
        finally:
            os.close(dirfd)
        more = f"\n[more than {limit} matches; narrow the pattern]" if len(found) > limit else ""
        return "\n".join(found[:limit]) + more if found else "no files match"

    def content_search(pattern: str, path: str = ".", glob: str | None = None, limit: int = 100,
                       ignore_case: bool = False) -> str:
        """Search file contents for a regular expression; prints path:line:text.

        Args:
            pattern: Regular expression to look for.
            path: Directory to search in, relative to the workspace.
            glob: Only files whose names match this glob (e.g. "*.py").
            limit: How many matching lines to return at most.
            ignore_case: Match without regard to case.
        """
        rel = ws.relative(path, "content_search")
        compiled = _line_pattern(pattern, ignore_case)
        name_filter = compile_glob(glob, "content_search") if glob else None
        dirfd = _open_dir(ws, rel, "content_search", policy)
        deadline = time.monotonic() + policy.shell_timeout_s
        out_of_time = False
        try:
            found = _candidates(dirfd, pattern, glob, name_filter, ignore_case, policy, rel)
            shown, budget = [], policy.max_output_bytes
            try:
                for name in found.names:
                    full = name if rel == "." else f"{rel}/{name}"
                    for number, line in _matching_lines(ws, dirfd, name, compiled, policy,
                                                        deadline):
                        shown.append(f"{visible(_printable(full))}:{number}:{line}")
                        budget -= len(shown[-1]) + 1
                        if len(shown) >= limit or budget <= 0:
                            break
                    if len(shown) >= limit or budget <= 0:
                        break
            except TimeoutError:
                out_of_time = True
        finally:
            os.close(dirfd)
        notes = [found.note] if found.note else []
        if out_of_time:
            notes.append(f"[the search was stopped at its time limit ({policy.shell_timeout_s:g} "
                         "s, security.shell_timeout_s): the pattern takes too long on these "
                         "lines; nested repeats such as (a|aa)+ backtrack without end, so "
                         "simplify it or narrow the search with path or glob]")
        if len(shown) >= limit:
            notes.append(f"[stopped at {limit} matches]")
        elif budget <= 0:
            notes.append(f"[stopped at {policy.max_output_bytes} bytes of output]")
        return "\n".join([*shown, *notes]) if shown else "\n".join(["no matches", *notes])

    return [
        Tool.from_function(glob_search, risk=ToolRisk.SAFE, metadata=ToolMetadata(
            read_only_hint=True, category="development", tags=frozenset({"file_system"}))),
        Tool.from_function(content_search, risk=ToolRisk.SAFE, metadata=ToolMetadata(
            read_only_hint=True, category="development", tags=frozenset({"file_system"}))),
    ]


@dataclass(frozen=True)
class _Found:
    names: Iterable[str]
    note: str = ""


def _candidates(dirfd: int, pattern: str, glob: str | None, name_filter: Glob | None,
                ignore_case: bool, policy: SecurityPolicy, prefix: str) -> _Found:
    """Files that may match, relative to ``dirfd``: ripgrep's or grep's list of matching files
    (they only choose files; every line shown is read again through the one rule set for
    reading, so a hard link or a swapped file never shows), else every regular file."""
    for lister in (_ripgrep, _grep):
        argv = lister(pattern, glob, ignore_case)
        if argv is None:
            continue
        result = run_helper(argv, cwd=f"/proc/self/fd/{dirfd}", pass_fds=(dirfd,), env=_ENV,
                            timeout_s=policy.shell_timeout_s, output_cap=policy.max_output_bytes)
        if result.exit_code not in (0, 1) and not (result.truncated or result.timed_out):
            continue  # the program refused the pattern: try the next way
        names = [n[2:] if n.startswith("./") else n for n in result.stdout.split("\0")]
        complete = names if not (result.truncated or result.timed_out) else names[:-1]
        note = ("[the search was stopped at its time or output limit; narrow it with path or "
                "glob]" if result.truncated or result.timed_out else "")
        return _Found(sorted(n for n in complete if n), note)
    return _Found(f"{base}/{name}" if base else name
                  for base, _, name, regular in _walk(dirfd, policy, prefix)
                  if regular and not (name_filter and not name_filter.match(name)))


def _line_pattern(pattern: str, ignore_case: bool) -> Any:
    """The model's regular expression, compiled by ``regex`` (the ``re`` syntax): its matches
    can be bounded in time and let go of the interpreter, where ``re`` backtracks as long as a
    pattern asks (``(a|aa)+$`` on a line of 60 ``a``: longer than the age of the universe),
    holding the interpreter, and so the whole server, all along."""
    try:
        import regex
    except ImportError as exc:
        raise missing("builtins", "content_search's regular expressions") from exc
    try:
        return regex.compile(pattern, regex.IGNORECASE if ignore_case else 0)
    except (regex.error, ValueError, OverflowError) as exc:
        raise InvalidArgumentsError(f"pattern is not a valid regular expression: {exc}",
                                    tool_name="content_search") from exc


def _matching_lines(ws: Workspace, dirfd: int, name: str, pattern: Any,
                    policy: SecurityPolicy, deadline: float) -> Iterator[tuple[int, str]]:
    """The lines of ``name`` that ``pattern`` finds; ``TimeoutError`` once ``deadline``
    (``time.monotonic``) has passed, even in the middle of one line's match."""
    data = read_text_or_none(ws, name, policy, "content_search", dirfd=dirfd,
                             max_bytes=policy.max_file_bytes)
    if data is None:
        return
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("content_search's time limit passed")
        if pattern.search(line, timeout=left, concurrent=True):
            yield number, line[:500]


def _printable(name: str) -> str:
    """A file name as text (names that are not UTF-8 show replacement characters)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _ripgrep(pattern: str, glob: str | None, ignore_case: bool) -> list[str] | None:
    rg = shutil.which("rg", path=_ENV["PATH"])
    if rg is None:
        return None
    argv = [rg, "--no-config", "--files-with-matches", "--null", "--color", "never", "--hidden",
            "--no-messages", "--glob", "!.git/"]
    if ignore_case:
        argv.append("--ignore-case")
    if glob:
        argv += ["--glob", glob]
    return [*argv, "-e", pattern, "--", "."]


def _grep(pattern: str, glob: str | None, ignore_case: bool) -> list[str] | None:
    grep = shutil.which("grep", path=_ENV["PATH"])
    if grep is None:
        return None
    argv = [grep, "-rlZIE", "-s", "--exclude-dir=.git"]
    if ignore_case:
        argv.append("-i")
    if glob:
        argv.append(f"--include={glob}")
    return [*argv, "-e", pattern, "--", "."]
