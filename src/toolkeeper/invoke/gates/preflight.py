"""Pre-flight: a call that the tool's own rules refuse is refused here, before a person is asked.

A tool declares its check (``Tool.preflight``: the shell's allowlist, a file tool's path rules,
git's options, the fetch tools' address rules, whether a sandbox can run here at all). The gate
calls it with the call's validated arguments — what the tool itself would get — and the check
raises what the tool's run would raise for them, so the refusal is the tool's own (same code,
same message), only earlier: no approval request is made for a call that could only fail. The
check never runs the tool and changes nothing; the tool checks again when it runs.

A sync check runs in a worker thread (it may look at the workspace), an async one on the loop,
and neither for longer than ``PREFLIGHT_S``. A check that raises anything but a refusal
(``ToolDidNotRunError``), or does not finish, refuses the call with an error naming the tool:
a broken check never lets a call reach a person unchecked, and never crashes the door.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Mapping
from dataclasses import replace
from functools import partial
from typing import Protocol, cast

import anyio
import anyio.to_thread

from ...core.spec import ToolLike
from ...errors import ToolDidNotRunError
from ...tools.signature import is_async_callable
from ...tools.tool import Tool
from ..results import InvocationResult
from ..state import Gate, Invocation, Next
from .errors import result_for

__all__ = ["PREFLIGHT_S", "PreflightGate"]

log = logging.getLogger("toolkeeper.invoke")

PREFLIGHT_S = 10.0
"""The longest a pre-flight check may take; one that takes longer refuses the call."""


class _Check(Protocol):
    """A pre-flight check: the call's arguments as keywords; a refusal raises."""

    def __call__(self, **arguments: object) -> object: ...


class PreflightGate(Gate):
    name = "preflight"

    def needed(self, tool: ToolLike) -> bool:
        return isinstance(tool, Tool) and tool.preflight is not None

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        tool = inv.known_tool
        check = tool.preflight if isinstance(tool, Tool) else None
        if check is None:
            return await call_next(inv)
        arguments = inv.resolved if inv.resolved is not None else inv.arguments
        try:
            await _run(check, arguments)
        except ToolDidNotRunError as exc:  # the tool's own refusal, told as it tells it
            return replace(result_for(inv, exc), refused_by=self.name)
        except Exception as exc:
            return replace(result_for(inv, _broken(tool.name, exc)), refused_by=self.name)
        return await call_next(inv)


async def _run(check: _Check, arguments: Mapping[str, object]) -> None:
    with anyio.fail_after(PREFLIGHT_S):
        if is_async_callable(check):
            await cast("Awaitable[object]", check(**arguments))
        else:
            await anyio.to_thread.run_sync(partial(check, **arguments), abandon_on_cancel=True)


def _broken(name: str, exc: Exception) -> ToolDidNotRunError:
    """The refusal of a call whose tool's pre-flight check failed (a bug in the check)."""
    if isinstance(exc, TimeoutError):
        what = f"did not finish within {PREFLIGHT_S:g} s"
    else:
        what = f"failed ({type(exc).__name__}: {exc})"
    log.warning("the pre-flight check of tool %r %s", name, what)
    return ToolDidNotRunError(
        f"the pre-flight check of tool '{name}' {what}, so the call was refused and nothing "
        "ran; this is a fault of the tool's check, not of the arguments — tell its author",
        tool_name=name, details={"gate": "preflight"})
