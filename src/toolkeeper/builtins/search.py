"""``glob_search`` and ``content_search``: find files and lines without leaving the workspace.

Both start from a directory fd opened with ``openat2`` and never follow symlinks. Content search
runs ripgrep (``--no-config``, ``-e PATTERN``, ``--``, no ``--follow``, no ``--pre``, a clean
environment, a timeout) with its working directory set to that fd, falls back to ``grep -r``,
then to a pure-Python search; all three give ``path:line:text`` lines.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from collections.abc import Iterator

from ..errors import InvalidArgumentsError
from ..tools.metadata import ToolMetadata
from ..tools.risk import ToolRisk
from ..tools.tool import Tool
from .fs import RESOLVE_BENEATH, RESOLVE_NO_MAGICLINKS, Workspace, _refuse, openat2
from .policy import SecurityPolicy

__all__ = ["glob_to_regex", "search_tools"]

MAX_WALK = 100_000
_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """``**/`` matches any depth, ``*`` and ``?`` stay inside one path part."""
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


def _open_dir(ws: Workspace, rel: str, tool: str) -> int:
    try:
        return openat2(ws.fd, rel, os.O_RDONLY | os.O_DIRECTORY,
                       resolve=RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
    except OSError as exc:
        raise _refuse(rel, f"it is not a directory inside the workspace ({exc.strerror})",
                      tool) from None


def _walk(dirfd: int) -> Iterator[tuple[str, int, str, bool]]:
    """(relative dir, its fd, entry name, is a regular file) without following symlinks."""
    walked = 0
    for top, dirs, files, fd in os.fwalk(".", dir_fd=dirfd, follow_symlinks=False):
        base = top[2:] if top.startswith("./") else ("" if top == "." else top)
        dirs.sort()
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
        regex = glob_to_regex(pattern)
        dirfd = _open_dir(ws, rel, "glob_search")
        found: list[str] = []
        try:
            for base, _, name, _ in _walk(dirfd):
                inner = f"{base}/{name}" if base else name
                full = inner if rel == "." else f"{rel}/{inner}"
                if (regex.match(inner) or regex.match(full)) and not policy.forbidden_rule(full):
                    found.append(full)
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
        try:
            compiled = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as exc:
            raise InvalidArgumentsError(f"pattern is not a valid regular expression: {exc}",
                                        tool_name="content_search") from exc
        dirfd = _open_dir(ws, rel, "content_search")
        try:
            lines = _ripgrep(dirfd, pattern, glob, ignore_case, policy)
            if lines is None:
                lines = _grep(dirfd, pattern, glob, ignore_case, policy)
            if lines is None:
                lines = _python(dirfd, compiled, glob, policy)
        finally:
            os.close(dirfd)
        shown = []
        for line in lines:
            file_part = line.split(":", 1)[0]
            full = file_part if rel == "." else f"{rel}/{file_part}"
            if policy.forbidden_rule(full):
                continue
            shown.append(full + line[len(file_part):])
            if len(shown) >= limit:
                break
        more = f"\n[stopped at {limit} matches]" if len(shown) >= limit else ""
        return "\n".join(shown) + more if shown else "no matches"

    return [
        Tool.from_function(glob_search, risk=ToolRisk.SAFE, metadata=ToolMetadata(
            read_only_hint=True, category="development", tags=frozenset({"file_system"}))),
        Tool.from_function(content_search, risk=ToolRisk.SAFE, metadata=ToolMetadata(
            read_only_hint=True, category="development", tags=frozenset({"file_system"}))),
    ]


def _run(argv: list[str], dirfd: int, policy: SecurityPolicy) -> str | None:
    try:
        proc = subprocess.run(argv, cwd=f"/proc/self/fd/{dirfd}", pass_fds=(dirfd,), env=_ENV,
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=30,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode not in (0, 1):
        return None
    return proc.stdout[: policy.max_output_bytes].decode("utf-8", "replace")


def _clean(text: str) -> list[str]:
    return [line[2:] if line.startswith("./") else line for line in text.splitlines() if line]


def _ripgrep(dirfd: int, pattern: str, glob: str | None, ignore_case: bool,
             policy: SecurityPolicy) -> list[str] | None:
    rg = shutil.which("rg", path=_ENV["PATH"])
    if rg is None:
        return None
    argv = [rg, "--no-config", "--line-number", "--no-heading", "--with-filename", "--color",
            "never", "--max-columns", "500", "--hidden", "--glob", "!.git/"]
    if ignore_case:
        argv.append("--ignore-case")
    if glob:
        argv += ["--glob", glob]
    out = _run([*argv, "-e", pattern, "--", "."], dirfd, policy)
    return None if out is None else _clean(out)


def _grep(dirfd: int, pattern: str, glob: str | None, ignore_case: bool,
          policy: SecurityPolicy) -> list[str] | None:
    grep = shutil.which("grep", path=_ENV["PATH"])
    if grep is None:
        return None
    argv = [grep, "-rnIE", "--exclude-dir=.git"]
    if ignore_case:
        argv.append("-i")
    if glob:
        argv.append(f"--include={glob}")
    out = _run([*argv, "-e", pattern, "--", "."], dirfd, policy)
    return None if out is None else _clean(out)


def read_text_file(dirfd: int, name: str, cap: int) -> bytes | None:
    """Up to ``cap`` bytes of a regular file in ``dirfd`` (no symlink), or ``None`` when it
    cannot be opened or looks binary."""
    try:
        file_fd = openat2(dirfd, name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(file_fd, "rb") as handle:
        data = handle.read(cap)
    return None if b"\x00" in data[:8192] else data


def _python(dirfd: int, regex: re.Pattern[str], glob: str | None,
            policy: SecurityPolicy) -> list[str]:
    name_filter = glob_to_regex(glob) if glob else None
    out: list[str] = []
    for base, fd, name, regular in _walk(dirfd):
        if not regular or (name_filter and not name_filter.match(name)) or base.startswith(".git"):
            continue
        data = read_text_file(fd, name, policy.max_file_bytes)
        if data is None:
            continue
        rel = f"{base}/{name}" if base else name
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
            if regex.search(line):
                out.append(f"{rel}:{number}:{line}")
    return out
