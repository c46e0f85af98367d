"""The call side of a batch: parse a provider response, run every call through the door,
render the results — what ``ToolInvoker.execute_tool_calls`` does (and with it the catalog's
``execute_tool_calls``, which builds the door through the seam in ``toolbox/door.py``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from ..core.call import ToolCall
from ..core.json import JsonObject
from ..core.results import ToolResult
from ..errors import UsageError
from ..formats import get_format
from ..toolbox.catalog import CatalogBase
from ..tools.runner import run_coroutine_sync
from .session import InvokerSession

if TYPE_CHECKING:
    from .invoker import ToolInvoker

__all__ = ["run_batch"]


def run_batch(
    invoker: ToolInvoker, catalog: CatalogBase, calls: Sequence[ToolCall] | object,
    api_format: str | None, session: InvokerSession | None,
) -> list[ToolResult] | list[JsonObject]:
    """See ``ToolInvoker.execute_tool_calls``: ``calls`` parsed with ``catalog``'s names."""
    session = session or invoker.open_session()
    if api_format is not None:
        parsed = catalog.export(api_format).parse(calls)
    elif isinstance(calls, Iterable) and not isinstance(calls, str | bytes | Mapping):
        parsed = _tool_calls(list(calls))
    else:
        raise UsageError(f"execute_tool_calls got a {type(calls).__name__} without api_format: "
                         "pass ToolCalls, or a provider response with its api_format")
    results = run_coroutine_sync(invoker.invoke_many(parsed, session=session))
    tool_results = [r.to_tool_result() for r in results]
    if api_format is None:
        return tool_results
    return get_format(api_format).render_batch(zip(parsed, tool_results, strict=True))


def _tool_calls(items: list[object]) -> list[ToolCall]:
    """``items`` when every one is a ``ToolCall``; else the error that says what to pass."""
    calls: list[ToolCall] = []
    for index, item in enumerate(items):
        if isinstance(item, ToolCall):
            calls.append(item)
        else:
            raise UsageError(
                f"execute_tool_calls without api_format takes ToolCalls, but item {index} is a "
                f"{type(item).__name__}: pass the format the calls came in (e.g. "
                "api_format='openai-chat') to parse them, or build ToolCalls; a program written "
                "for toolregistry gets its format detection from toolkeeper.compat.toolregistry")
    return calls
