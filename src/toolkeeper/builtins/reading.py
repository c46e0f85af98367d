"""The one rule set for reading a file, used by every tool that shows file contents.

``file_read``, ``file_edit``, ``content_search`` and ``semantic_code_search`` all read through
``read_checked``, so they cannot disagree: a file is read only if ``open_readable`` accepts it
(inside the workspace, not a symlink, regular, single-linked), its real location is not a
forbidden path, and no directory on the way to it is a toolkeeper state folder.
"""

from __future__ import annotations

import os

from ..errors import PolicyViolationError
from .fs import Workspace, open_readable
from .policy import SecurityPolicy

__all__ = ["looks_binary", "open_checked", "read_checked", "read_text_or_none"]

_SNIFF = 8192


def looks_binary(data: bytes) -> bool:
    """A NUL byte in the first 8 KiB: not shown as text."""
    return b"\x00" in data[:_SNIFF]


def read_checked(ws: Workspace, rel: str, policy: SecurityPolicy, tool: str, *,
                 max_bytes: int, dirfd: int | None = None) -> tuple[bytes, int]:
    """Up to ``max_bytes`` of the file ``rel`` (below ``dirfd``, default the workspace root)
    and its full size.

    Raises:
        PolicyViolationError: naming the rule that refused the file.
    """
    fd = open_checked(ws, rel, policy, tool, dirfd=dirfd)
    try:
        return ws.read_fd(fd, max_bytes)
    finally:
        os.close(fd)


def open_checked(ws: Workspace, rel: str, policy: SecurityPolicy, tool: str, *,
                 dirfd: int | None = None) -> int:
    """A read-only fd of the file ``rel`` (below ``dirfd``, default the workspace root) that
    the rules let be read; the caller closes it. A file tool's pre-flight opens and closes it
    (reading nothing) to refuse what its run would.

    Raises:
        PolicyViolationError: naming the rule that refused the file.
    """
    fd = open_readable(ws.fd if dirfd is None else dirfd, rel, tool)
    try:
        real = ws.real_relative(fd)
        policy.check_path(real, write=False, tool=tool)
        ws.check_location(fd, real, rel, tool)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_text_or_none(ws: Workspace, rel: str, policy: SecurityPolicy, tool: str, *,
                      max_bytes: int, dirfd: int | None = None) -> bytes | None:
    """What ``read_checked`` reads, or ``None`` for a refused or binary file (searches skip
    those rather than fail)."""
    try:
        data, _ = read_checked(ws, rel, policy, tool, max_bytes=max_bytes, dirfd=dirfd)
    except PolicyViolationError:
        return None
    return None if looks_binary(data) else data
