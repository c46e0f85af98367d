"""The built-ins' pre-flight checks, and which served tools can never run here.

A built-in's run and its pre-flight share one function, so a rule is written once: the tool
calls it first thing when it runs, and declares it as its ``Tool.preflight``, which the door
runs before a person is asked (``invoke/gates/preflight.py``). A call its rules refuse is then
refused at once, with the same message, instead of after someone approved it.

A tool that needs something of the host (a sandbox that can run in this workspace) also says
why no call of it can run at all, or what its calls cannot do: ``toolkeeper serve`` prints one
line per such tool when it starts (``host_warnings``), naming what to change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..core.spec import ToolLike
from ..tools.tool import Tool

__all__ = ["Preflight", "host_warnings"]


def _nothing() -> str | None:
    return None


class Preflight:
    """A built-in's pre-flight check: called with a call's arguments (as keywords), it raises
    what the tool's own run raises for them.

    Args:
        check: The rules, shared with the tool's run.
        blocked: Why no call of the tool can run here, whatever its arguments (``None``: calls
            can); worked out when asked, cheaply (probes are cached).
        limited: What the tool's calls cannot do here though they run (``None``: nothing).
    """

    def __init__(self, check: Callable[..., object], *,
                 blocked: Callable[[], str | None] = _nothing,
                 limited: Callable[[], str | None] = _nothing) -> None:
        self.check = check
        self.blocked = blocked
        self.limited = limited

    def __call__(self, **arguments: Any) -> None:
        self.check(**arguments)


def host_warnings(tools: Iterable[ToolLike]) -> list[str]:
    """One line per tool that can never run here, or whose calls cannot do all they could,
    each naming what to change (what ``serve`` prints as it starts)."""
    lines: list[str] = []
    for tool in tools:
        check = tool.preflight if isinstance(tool, Tool) else None
        if not isinstance(check, Preflight):
            continue
        blocked = check.blocked()
        if blocked is not None:
            lines.append(f"tool '{tool.name}' can never run here: {blocked}")
            continue
        limited = check.limited()
        if limited is not None:
            lines.append(f"tool '{tool.name}' runs, but {limited}")
    return lines
