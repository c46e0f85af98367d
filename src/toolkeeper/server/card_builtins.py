"""The card views toolkeeper ships: the generic one (every argument, multi-line strings as
text blocks, a URL argument as a request) and the built-in tools' own — ``file_write`` and
``file_edit`` as a diff against the file as it is now, ``shell`` as the command with the
sandbox it will run under, ``http_fetch``/``http_request`` as method + URL.

The file views read the current file exactly as the tools do: the tool's ``SecurityPolicy``
(its metadata's ``extra["security_policy"]``, set by ``builtins.files`` and
``builtins.shell``), the workspace opened once, ``Workspace.relative``, the forbidden-path
rules, and ``read_checked`` (openat2 beneath the workspace, regular single-linked files) —
never a path string. A path the tool would refuse is not shown, and the card says why.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from ..builtins.fs import Workspace, lstat_beneath
from ..builtins.policy import SecurityPolicy
from ..builtins.reading import looks_binary, read_checked
from ..builtins.shell import command_words, sandbox_blocker
from ..core.spec import ToolLike
from ..errors import PolicyViolationError
from ..sandbox import probe
from .cards import DiffSection, RowsSection, Section, TextSection, UrlSection

__all__ = ["BUILTIN_VIEWS", "POLICY_KEY", "generic_sections"]

POLICY_KEY = "security_policy"
BLOCK_CHARS = 200
"""A string argument longer than this (or with a newline) gets its own text block."""
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_URL_NAMES = ("url", "uri", "href", "endpoint", "link")
BuiltinView = Callable[[ToolLike | None, dict[str, Any]], list[Section] | None]


def _path(base: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{base}[{key}]"
    if _NAME.fullmatch(key):
        return f"{base}.{key}" if base else key
    return f"{base}[{json.dumps(key, ensure_ascii=False)}]"


def _leaves(value: Any, base: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        return [leaf for k, v in value.items() for leaf in _leaves(v, _path(base, str(k)))]
    if isinstance(value, list) and value:
        return [leaf for i, v in enumerate(value) for leaf in _leaves(v, _path(base, i))]
    return [(base or "(arguments)", value)]


_JSON = json.JSONEncoder(ensure_ascii=False, default=str)  # one encoder: 90,000 leaves add up


def _literal(value: Any) -> str:
    return _JSON.encode(value)


def generic_sections(arguments: dict[str, Any], *, skip: frozenset[str] = frozenset()
                     ) -> list[Section]:
    """Every argument but ``skip``: short values as rows (JSON literals, so ``"1"`` and ``1``
    differ), long or multi-line strings as text blocks (their row points to the block), and
    a top-level URL argument as a request first."""
    shown = {k: v for k, v in arguments.items() if k not in skip}
    if not shown:
        return [] if skip else [RowsSection(title="arguments", rows=[("(none)", "{}")])]
    rows: list[tuple[str, str | int | float | bool | None]] = []
    blocks: list[Section] = []
    for path, value in _leaves(shown):
        if isinstance(value, str) and ("\n" in value or len(value) > BLOCK_CHARS):
            lines = value.count("\n") + 1
            rows.append((path, f"(text, {lines:,} line{'s' if lines > 1 else ''} and "
                               f"{len(value):,} characters: its own block below)"))
            blocks.append(TextSection(title=path, text=value))
        else:
            rows.append((path, _literal(value)))
    sections: list[Section] = [RowsSection(title="arguments", rows=rows), *blocks]
    url = next((shown[k] for k in _URL_NAMES if isinstance(shown.get(k), str)), None)
    if url is not None:
        method = shown.get("method")
        sections.insert(0, UrlSection(url=url, method=method if isinstance(method, str) else ""))
    return sections


def _policy(tool: ToolLike | None) -> SecurityPolicy | None:
    found = tool.metadata.extra.get(POLICY_KEY) if tool is not None else None
    return found if isinstance(found, SecurityPolicy) else None


def current_file(policy: SecurityPolicy | None, path: str, tool: str) -> tuple[str | None, str]:
    """(the file's text now, or ``None``; what to say about it)."""
    if policy is None:
        return None, ("not compared: this tool does not say which workspace it writes to; "
                      "every line is shown as added")
    ws = Workspace(policy.workspace)
    try:
        rel = ws.relative(path, tool)
        rule = policy.forbidden_rule(rel)
        if rule is not None:
            return None, (f"not shown: protected path (rule {rule!r}); the tool will refuse "
                          "this call")
        # missing (lstat_beneath walks no '..': with one, the reader below decides)
        if ".." not in rel.split("/") and lstat_beneath(ws.fd, rel) is None:
            return None, f"new file: {rel} does not exist yet; every line is added"
        data, size = read_checked(ws, rel, policy, tool, max_bytes=policy.max_file_bytes)
    except PolicyViolationError as exc:
        protected = exc.details.get("rule") == "forbidden_paths"
        return None, ("not shown: protected path; the tool will refuse this call" if protected
                      else f"not shown: {exc}")
    finally:
        ws.close()
    if size > policy.max_file_bytes:
        return None, (f"not compared: the file is {size:,} bytes, over the "
                      f"{policy.max_file_bytes:,}-byte limit (the tool will refuse it)")
    if looks_binary(data):
        return None, f"not compared: the file now is binary ({size:,} bytes)"
    return data.decode("utf-8", errors="replace"), f"compared with {rel} as it is now"


def _file_write(tool: ToolLike | None, arguments: dict[str, Any]) -> list[Section] | None:
    path, content = arguments.get("path"), arguments.get("content")
    if not isinstance(path, str) or not isinstance(content, str):
        return None
    old, note = current_file(_policy(tool), path, "file_write")
    return [RowsSection(title="writes", rows=[("path", path)]),
            DiffSection(title=path, old=old, new=content, note=note),
            *generic_sections(arguments, skip=frozenset({"path", "content"}))]


def _file_edit(tool: ToolLike | None, arguments: dict[str, Any]) -> list[Section] | None:
    path, old, new = (arguments.get(k) for k in ("path", "old", "new"))
    if not isinstance(path, str) or not isinstance(old, str) or not isinstance(new, str):
        return None
    text, note = current_file(_policy(tool), path, "file_edit")
    rest = generic_sections(arguments, skip=frozenset({"path", "old", "new"}))
    head: list[Section] = [RowsSection(title="edits", rows=[("path", path)])]
    count = text.count(old) if text is not None and old else 0
    refused = ("" if text is None else "the text to replace is not in the file: the tool "
               "will refuse this edit" if count == 0 else
               f"the text to replace occurs {count} times and unique is set: the tool will "
               "refuse this edit" if count > 1 and arguments.get("unique") is True else "")
    if text is None or refused:
        return [*head, TextSection(title="old (the text to replace)", text=old,
                                   note=refused or note),
                TextSection(title="new (its replacement)", text=new), *rest]
    edited = text.replace(old, new, 1)
    which = f"replaces the first of {count} occurrences; " if count > 1 else ""
    return [*head, DiffSection(title=path, old=text, new=edited, note=which + note), *rest]


def _sandbox(policy: SecurityPolicy | None) -> list[tuple[str, str | int | float | bool | None]]:
    if policy is None:
        return [("runs under", "unknown: this tool does not say which sandbox it uses")]
    if policy.autonomy == "read_only":
        return [("runs under", "nothing: commands are refused (security.autonomy is read_only)")]
    blocker = sandbox_blocker(policy)
    found = probe()
    confined = (f"{found.backend} sandbox, a fresh one for this call ({found.detail})"
                if blocker is None else
                f"UNCONFINED: no sandbox ({blocker}); it runs as this server's user"
                if policy.allow_unconfined else f"nothing: the tool will refuse it ({blocker})")
    writable = "nothing (read-only)" if policy.read_only else f"the workspace {policy.workspace}"
    return [("runs under", confined), ("may write", writable),
            ("network", "allowed" if policy.network else "none"),
            ("time limit", f"{policy.shell_timeout_s:g} s"),
            ("memory limit", f"{policy.max_memory_bytes >> 20:,} MiB")]


def _shell(tool: ToolLike | None, arguments: dict[str, Any]) -> list[Section] | None:
    command = arguments.get("command")
    if not isinstance(command, str):
        return None
    rows = _sandbox(_policy(tool))
    try:
        commands, constructs = command_words(command)
        programs = ", ".join(dict.fromkeys(words[0] for words in commands if words))
        rows += [("programs", programs or "(none)"),
                 ("constructs", ", ".join(constructs) or "(none)")]
    except PolicyViolationError as exc:
        rows.append(("programs", f"cannot be analysed: the tool will refuse it ({exc})"))
    return [TextSection(title="command", text=command), RowsSection(title="runs", rows=rows),
            *generic_sections(arguments, skip=frozenset({"command"}))]


def _http(tool: ToolLike | None, arguments: dict[str, Any]) -> list[Section] | None:
    url = arguments.get("url")
    if not isinstance(url, str):
        return None
    method = arguments.get("method", "GET" if tool is None or tool.name == "http_fetch" else "")
    body = arguments.get("body")
    sections: list[Section] = [UrlSection(url=url, method=method if isinstance(method, str)
                                          else _literal(method))]
    headers = arguments.get("headers")
    if isinstance(headers, dict) and headers:
        sections.append(RowsSection(title="headers", rows=[(str(k), v if isinstance(v, str)
                                                            else _literal(v))
                                                           for k, v in headers.items()]))
    if isinstance(body, str):
        sections.append(TextSection(title="body", text=body))
    used = {"url", "method"} | ({"headers"} if isinstance(headers, dict) and headers else set())
    used |= {"body"} if isinstance(body, str) else set()
    return [*sections, *generic_sections(arguments, skip=frozenset(used))]


BUILTIN_VIEWS: dict[str, BuiltinView] = {
    "file_write": _file_write, "file_edit": _file_edit, "shell": _shell,
    "http_fetch": _http, "http_request": _http,
}
