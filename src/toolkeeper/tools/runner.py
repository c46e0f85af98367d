"""Calling a tool's callable: argument binding, sync/async bridging, worker threads."""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
from collections.abc import Callable, Coroutine
from functools import partial
from typing import TypeVar

from .threads import run_in_worker

__all__ = ["call_async", "call_sync", "run_coroutine_sync"]

Binding = tuple[tuple[str, ...], str | None, object]
"""How a call's arguments reach the function: the positional-only names, the name of the
context parameter (if any) and the context."""

_T = TypeVar("_T")
_Y = TypeVar("_Y")
_S = TypeVar("_S")


def _bind(kwargs: dict[str, object], binding: Binding) -> tuple[list[object], dict[str, object]]:
    positional, ctx_param, ctx = binding
    kw = dict(kwargs) if positional or ctx_param else kwargs
    args = [kw.pop(name) for name in positional if name in kw]
    if ctx_param is not None:
        kw[ctx_param] = ctx
    return args, kw


def run_coroutine_sync(coro: Coroutine[_Y, _S, _T]) -> _T:
    """Run a coroutine to completion from synchronous code.

    Without a running event loop in this thread, a fresh loop runs it; inside one (a sync call
    from async code), it runs on a fresh loop in a helper thread so the caller's loop is not
    re-entered.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        done: concurrent.futures.Future[_T] = pool.submit(asyncio.run, coro)
        return done.result()


def call_sync(func: Callable[..., object], kwargs: dict[str, object], binding: Binding) -> object:
    """Call ``func`` from synchronous code; coroutines it returns are run to completion."""
    args, kw = _bind(kwargs, binding)
    value = func(*args, **kw)
    if inspect.iscoroutine(value):
        done: object = run_coroutine_sync(value)
        return done
    return value


async def call_async(
    func: Callable[..., object], kwargs: dict[str, object], binding: Binding, *, in_thread: bool
) -> object:
    """Call ``func`` from async code; sync functions run in a worker thread when ``in_thread``."""
    args, kw = _bind(kwargs, binding)
    if in_thread:
        # A thread cannot be stopped: on timeout or cancellation it is abandoned, its result ignored.
        value = await run_in_worker(partial(func, *args, **kw))
    else:
        value = func(*args, **kw)
    if inspect.isawaitable(value):
        value = await value
    return value
