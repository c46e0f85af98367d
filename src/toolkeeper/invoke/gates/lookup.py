"""Lookup: the call names a tool the catalog offers (else the closest names are suggested) and
the session may call (``session.tools``), and so may its caller (``Caller.tools``: an access
token's scopes).

The invoker looks the tool up once, before the chain; this gate turns a miss into the
catalog's error.
"""

from __future__ import annotations

from ...core.spec import ToolLike
from ...errors import (
    InvalidArgumentsError,
    MalformedCallError,
    PolicyViolationError,
    ToolCallError,
    UnknownToolError,
)
from ...toolbox.catalog import CatalogBase
from ..results import InvocationResult
from ..state import Gate, Invocation, Next

__all__ = ["LookupGate"]

_PROBLEMS: dict[str, type[ToolCallError]] = {
    "unknown_tool": UnknownToolError, "invalid_arguments": InvalidArgumentsError}


class LookupGate(Gate):
    name = "lookup"
    ends_unknown = True

    def __init__(self, catalog: CatalogBase) -> None:
        self.catalog = catalog

    def needed(self, tool: ToolLike) -> bool:
        return False  # a known tool was found; only the chain for unknown names needs this

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        problem = inv.call.problem
        caller = inv.ctx.caller if inv.ctx is not None else inv.session.caller
        if caller.tools is not None and inv.tool is None and (
                problem is None or problem.code == "unknown_tool"):
            raise _not_granted(inv.call.name, caller.client)  # never a hidden tool's name
        if problem is not None:
            raise _PROBLEMS.get(problem.code, MalformedCallError)(
                problem.message, tool_name=inv.call.name or None)
        if inv.tool is None:
            name, allowed = inv.call.name, inv.session.tools
            if allowed is not None and name not in allowed and self.catalog.get(name):
                listed = sorted(allowed)
                raise PolicyViolationError(
                    f"tool '{name}' is not callable in this session (callable: "
                    f"{', '.join(listed[:20]) or 'none'}"
                    + (f" and {len(listed) - 20} more" if len(listed) > 20 else "") + ")",
                    tool_name=name)
            raise self.catalog.unknown(name)
        return await call_next(inv)


def _not_granted(name: str, client: str) -> PolicyViolationError:
    """A call of a tool a limited caller may not use — or that does not exist: the answer is
    the same, so it tells nothing of the tools the caller cannot see."""
    return PolicyViolationError(
        f"tool '{name}' is not among the tools client {client!r} may call (its access "
        "token's scopes cover only some; tools/list shows them): ask for a token with a "
        "scope that covers it", tool_name=name)
