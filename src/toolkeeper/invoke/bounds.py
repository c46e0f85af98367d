"""Bounds on a call's arguments, checked at the door before any gate runs: how deep they nest,
how many values they hold, and that they are what JSON (and so the audit log) can hold.

A call over a bound is refused with ``invalid_arguments`` naming the bound, and recorded with a
short stand-in for its arguments, so nothing runs that the audit log could not record.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from ..core.call import CallProblem, ToolCall
from .policy import ChainPolicy

__all__ = ["argument_problem", "bounded_call"]

_KEYS = (str, int, float, bool, type(None))
"""The dict keys JSON (the audit's ``json.dumps``) can write."""
_FLAT = frozenset({str, int, float, bool, type(None)})
"""Values that hold nothing: a dict of such values under string keys is within every bound
but the count, which its length tells (most calls' arguments look like this)."""


def argument_problem(arguments: dict[str, object], policy: ChainPolicy) -> str | None:
    """What is wrong with ``arguments`` as the door bounds them, or ``None``. Walks them
    without recursion (a hostile nesting cannot exhaust the stack here) and stops at the first
    bound passed (a cycle is a nesting past every bound)."""
    max_depth, max_items = policy.max_argument_depth, policy.max_argument_items
    if type(arguments) is dict and len(arguments) < max_items:
        for key, value in arguments.items():
            if type(key) is not str or type(value) not in _FLAT:
                break
        else:
            return None
    stack: list[tuple[object, int]] = [(arguments, 1)]
    items = 0
    while stack:
        value, depth = stack.pop()
        items += 1
        if items > max_items:
            return (f"the arguments hold more than {max_items} values (the limit is "
                    "max_argument_items); send fewer, or pass large data as an artifact")
        children: Iterable[object]
        if isinstance(value, dict):
            children = value.values()
            bad = next((k for k in value if not isinstance(k, _KEYS)), None)
            if bad is not None:
                return (f"an argument object has a key of type {type(bad).__name__}; "
                        "keys must be strings")
        elif isinstance(value, list | tuple):
            children = value
        else:
            continue
        if depth > max_depth:
            return (f"the arguments nest deeper than {max_depth} levels (the limit is "
                    "max_argument_depth); flatten them")
        stack.extend((child, depth + 1) for child in children)
    return None


def bounded_call(call: ToolCall, policy: ChainPolicy) -> ToolCall:
    """``call`` as it stands when its arguments are within bounds; else the same call marked
    malformed (``invalid_arguments``), its arguments replaced by a stand-in the audit can
    write."""
    if call.problem is not None:
        return call
    problem = argument_problem(call.arguments, policy)
    if problem is None:
        return call
    return replace(call, arguments={"$refused": problem}, raw_arguments=None,
                   problem=CallProblem(code="invalid_arguments", message=problem))
