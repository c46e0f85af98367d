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
from .globs import MAX_GLOB, Glob, compile_glob
from .policy import SecurityPolicy
from .reading import read_text_or_none
from .state_dirs import state_file_in, state_in_names

__all__ = ["MAX_GLOB", "Glob", "compile_glob", "search_tools"]

MAX_WALK = 100_000
_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}


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
                if ((matcher.match(inner) or (rel != "." and matcher.match(full)))
                        and not policy.forbidden_rule(full)):
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
