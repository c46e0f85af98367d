"""Tools and invokers shared by the invoker tests."""

from __future__ import annotations

import threading
import time
from typing import Any

from toolkeeper import ToolMetadata, tool
from toolkeeper.core.spec import ToolLike
from toolkeeper.hooks import HookEvent, HookManager
from toolkeeper.invoke import ToolCall, ToolInvoker
from toolkeeper.toolbox import Toolbox

THREADS: list[int] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    THREADS.append(threading.get_ident())
    return a + b


@tool(inline=True)
def add_inline(a: int, b: int) -> int:
    """Add two integers on the event loop."""
    THREADS.append(threading.get_ident())
    return a + b


@tool
def boom(message: str) -> str:
    """Always fails."""
    raise RuntimeError(message)


@tool(timeout=0.2)
def slow(seconds: float) -> str:
    """Sleeps."""
    time.sleep(seconds)
    return "done"


@tool(risk="critical")
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


@tool
def big(size: int) -> str:
    """Returns a lot of text."""
    return "x" * size


def call(tool_name: str, /, **arguments: Any) -> ToolCall:
    call.counter += 1  # type: ignore[attr-defined]
    return ToolCall(id=f"c{call.counter}", name=tool_name, arguments=arguments)  # type: ignore[attr-defined]


call.counter = 0  # type: ignore[attr-defined]


def toolbox(*extra: ToolLike) -> Toolbox:
    return Toolbox([add, add_inline, boom, slow, delete_file, big, *extra])


def recording_hooks() -> tuple[HookManager, list[tuple[str, dict[str, Any]]]]:
    hooks = HookManager()
    events: list[tuple[str, dict[str, Any]]] = []
    for event in HookEvent:
        hooks.register(event, lambda e, payload: events.append((e.value, payload)))
    return hooks, events


def invoker(**kwargs: Any) -> ToolInvoker:
    return ToolInvoker(toolbox(), **kwargs)


__all__ = ["ToolMetadata", "call", "invoker", "recording_hooks", "toolbox"]
