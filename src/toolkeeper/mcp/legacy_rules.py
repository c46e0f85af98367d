"""What a tool's task support (``execution.taskSupport``) allows a 2025-11-25 call, as that
revision says: a client asks for a task itself (``params.task``), so a tool that does not run
as one (``forbidden``, the default) is refused when asked to, and a tool that runs only as one
(``required``) is refused when called plainly — both with -32601 (method not found), naming
the tool and how to call it."""

from __future__ import annotations

from mcp.shared.exceptions import MCPError

from .wire import METHOD_NOT_FOUND

__all__ = ["refusal"]


def refusal(tool: str, support: str, asked: bool) -> MCPError | None:
    """Why a 2025-11-25 call of ``tool`` (declared ``support``) that did (``asked``) or did
    not ask to run as a task is refused, else ``None``."""
    if asked and support == "forbidden":
        return MCPError(code=METHOD_NOT_FOUND, message=(
            f"tool {tool!r} does not run as a task (its execution.taskSupport is "
            "'forbidden'): call it without params.task. Its author declares it "
            '@tool(task_support="optional") for it to run as one'),
            data={"taskSupport": support})
    if not asked and support == "required":
        return MCPError(code=METHOD_NOT_FOUND, message=(
            f"tool {tool!r} runs only as a task (its execution.taskSupport is 'required'): "
            'call it with params.task (e.g. {"ttl": 60000}), then follow the task with '
            "tasks/get and tasks/result"), data={"taskSupport": support})
    return None
