"""``network`` of a sandboxed stdio upstream: ``false``, ``true`` or a list of hosts."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

__all__ = ["Network"]

_ENTRY = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(:\d{1,5})?")


def _entries(value: bool | list[str]) -> bool | list[str]:
    for entry in value if isinstance(value, list) else []:
        if not _ENTRY.fullmatch(entry):
            raise ValueError(f"network entry {entry!r} is not 'host', 'host:port' or "
                             "'[v6 address]:port'")
    return value


Network = Annotated[bool | list[str], AfterValidator(_entries)]
"""``false``: no network; ``true``: the host's; a list (``"registry.npmjs.org"``,
``"api.example.com:8443"``): those hosts alone, through a filtering proxy on the host
(``gateway.egress``)."""
