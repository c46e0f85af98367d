"""``file_read``, ``file_write`` and ``file_edit``: host-side file tools confined by ``fs``."""

from __future__ import annotations

import difflib
import io
import os

from ..core.metadata import ToolMetadata
from ..core.risk import ToolRisk
from ..errors import InvalidArgumentsError
from ..extras import missing
from ..tools.tool import Tool
from .fs import Workspace
from .policy import SecurityPolicy
from .preflight import Preflight
from .reading import looks_binary, open_checked, read_checked

__all__ = ["file_tools"]

def _text_of(data: bytes, rel: str) -> str | None:
    if data.startswith(b"%PDF-"):
        return _pdf_text(data, rel)
    if looks_binary(data):
        return None
    return data.decode("utf-8", errors="replace")


def _pdf_text(data: bytes, rel: str) -> str:
    try:
        from pypdf import PdfReader
    except ImportError as exc:
        raise missing("builtins", "reading a PDF") from exc
    try:
        reader = PdfReader(io.BytesIO(data))
        return "\n".join(page.extract_text() or "" for page in reader.pages)
    except Exception as exc:
        raise InvalidArgumentsError(f"'{rel}' looks like a PDF but cannot be read ({exc})",
                                    tool_name="file_read") from exc


def _numbered(text: str, offset: int, limit: int, cap: int) -> str:
    lines = text.splitlines()
    chosen = lines[offset: offset + limit]
    out = [f"{offset + i + 1:>6}\t{line}" for i, line in enumerate(chosen)]
    body = "\n".join(out)
    notes = []
    if offset + limit < len(lines):
        notes.append(f"[{len(lines) - offset - limit} more lines; read on with offset="
                     f"{offset + limit}]")
    if len(body.encode()) > cap:
        body = body.encode()[:cap].decode("utf-8", errors="ignore")
        notes.append(f"[output cut at {cap} bytes]")
    return "\n".join([body, *notes]) if notes else body


def file_tools(policy: SecurityPolicy) -> list[Tool]:
    """The three file tools, bound to ``policy`` and its workspace."""
    ws = Workspace(policy.workspace)

    def read_text(rel: str, tool: str) -> str:
        data, size = read_checked(ws, rel, policy, tool, max_bytes=policy.max_file_bytes)
        if size > policy.max_file_bytes:
            raise InvalidArgumentsError(f"'{rel}' is {size} bytes, more than the "
                                        f"{policy.max_file_bytes}-byte limit", tool_name=tool)
        text = _text_of(data, rel)
        if text is None:
            raise InvalidArgumentsError(f"'{rel}' is a binary file ({size} bytes); it is not "
                                        "shown as text", tool_name=tool)
        return text

    def target(path: str, tool: str, *, write: bool) -> str:
        """The workspace-relative path, refused by the path rules (absolute outside, NUL and
        invisible characters, forbidden paths, state files, read-only)."""
        rel = ws.relative(path, tool)
        policy.check_path(rel, write=write, tool=tool)
        return rel

    def written(path: str, content: str) -> tuple[str, bytes]:
        """file_write's refusals decided by its arguments: the path rules and the size."""
        rel = target(path, "file_write", write=True)
        data = content.encode("utf-8")
        if len(data) > policy.max_file_bytes:
            raise InvalidArgumentsError(f"content is {len(data)} bytes, more than the "
                                        f"{policy.max_file_bytes}-byte limit", tool_name="file_write")
        return rel, data

    # Each tool's pre-flight, which its run calls first: the refusals that do not depend on
    # what the file holds, checked as the workspace is now, changing nothing.
    def check_read(path: str, offset: int = 0, limit: int = 2000) -> str:
        rel = target(path, "file_read", write=False)
        os.close(open_checked(ws, rel, policy, "file_read"))
        return rel

    def check_write(path: str, content: str) -> tuple[str, bytes]:
        rel, data = written(path, content)
        ws.check_write(rel, "file_write")
        return rel, data

    def check_edit(path: str, old: str, new: str, unique: bool = False) -> str:
        rel = target(path, "file_edit", write=True)
        os.close(open_checked(ws, rel, policy, "file_edit"))
        ws.check_write(rel, "file_edit")
        return rel

    def file_read(path: str, offset: int = 0, limit: int = 2000) -> str:
        """Read a text file (or a PDF's text) with line numbers.

        Args:
            path: File path, relative to the workspace.
            offset: First line to show (0 = the beginning).
            limit: How many lines to show at most.
        """
        text = read_text(check_read(path), "file_read")
        return _numbered(text, max(0, offset), max(1, limit), policy.max_output_bytes)

    def file_write(path: str, content: str) -> str:
        """Create or overwrite a file with the given content (atomically).

        Args:
            path: File path, relative to the workspace; missing directories are created.
            content: The complete new content.
        """
        rel, data = check_write(path, content)
        ws.write_atomic(rel, data, "file_write")
        return f"wrote {len(data)} bytes to {rel}"

    def file_edit(path: str, old: str, new: str, unique: bool = False) -> str:
        """Replace the first exact occurrence of ``old`` with ``new`` in a file.

        Args:
            path: File path, relative to the workspace.
            old: The exact text to replace (whitespace included).
            new: The replacement text.
            unique: Refuse when ``old`` occurs more than once.
        """
        rel = check_edit(path, old, new, unique)
        text = read_text(rel, "file_edit")
        count = text.count(old) if old else 0
        if count == 0:
            raise InvalidArgumentsError(_not_found(rel, text, old), tool_name="file_edit")
        if unique and count > 1:
            lines = [i + 1 for i, line in enumerate(text.splitlines()) if old.splitlines()[0] in line]
            raise InvalidArgumentsError(
                f"'old' occurs {count} times in {rel} (lines {', '.join(map(str, lines[:10]))}); "
                "include more surrounding text so it is unique", tool_name="file_edit")
        ws.write_atomic(rel, text.replace(old, new, 1).encode("utf-8"), "file_edit")
        return f"replaced 1 of {count} occurrence(s) in {rel}"

    # The approval page reads the policy to show a write as a diff against the file as it is
    # (through the same reader and rules: server/card_builtins.py).
    write_meta = {"destructive_hint": True, "tags": frozenset({"file_system"}),
                  "extra": {"security_policy": policy}}
    return [
        Tool.from_function(file_read, risk=ToolRisk.SAFE, metadata=ToolMetadata(
            read_only_hint=True, tags=frozenset({"file_system", "read_only"}),
            category="development"), preflight=Preflight(check_read)),
        Tool.from_function(file_write, risk=ToolRisk.HIGH, metadata=ToolMetadata(
            category="development", idempotent_hint=True, **write_meta),
            preflight=Preflight(check_write)),
        Tool.from_function(file_edit, risk=ToolRisk.HIGH, metadata=ToolMetadata(
            category="development", **write_meta), preflight=Preflight(check_edit)),
    ]


def _not_found(rel: str, text: str, old: str) -> str:
    if not old:
        return "'old' is empty; give the exact text to replace"
    lines = text.splitlines()
    first = old.splitlines()[0] if old.splitlines() else old
    close = difflib.get_close_matches(first, lines, n=1, cutoff=0.5)
    if not close:
        return f"'old' was not found in {rel} and no line resembles it; read the file first"
    index = lines.index(close[0])
    nearby = "\n".join(f"{i + 1:>6}\t{lines[i]}" for i in range(max(0, index - 2),
                                                                   min(len(lines), index + 3)))
    return (f"'old' was not found in {rel}. The closest text is at line {index + 1}:\n{nearby}\n"
            "Copy the text exactly, including whitespace.")
