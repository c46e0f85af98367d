"""The door runs on asyncio (anyio's asyncio backend), as docs/invoker.md says: awaited from
anywhere else it refuses at once with a message saying how to run it, before any gate runs."""

from __future__ import annotations

import anyio
import pytest

from toolkeeper import tool
from toolkeeper.errors import UsageError
from toolkeeper.invoke import ToolInvoker
from toolkeeper.invoke.invoker import ASYNCIO_ONLY

from .helpers import call

RAN: list[int] = []


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    RAN.append(a + b)
    return a + b


def test_awaited_outside_asyncio_the_door_refuses_before_anything_runs() -> None:
    RAN.clear()
    invoker = ToolInvoker([add])
    session = invoker.open_session()
    # Driven by hand, as any other event loop (trio's) drives a coroutine: no asyncio task.
    pending = invoker.invoke(call("add", a=1, b=2), session=session)
    with pytest.raises(UsageError, match="runs on asyncio") as refused:
        pending.send(None)
    assert str(refused.value) == ASYNCIO_ONLY and "invoke_sync()" in ASYNCIO_ONLY
    assert RAN == [] and session.trace == ()


def test_under_anyio_on_asyncio_the_door_runs() -> None:
    RAN.clear()
    invoker = ToolInvoker([add])

    async def main() -> int:
        async with invoker.open_session() as session:
            result = await invoker.invoke(call("add", a=1, b=2), session=session)
        return int(result.text)

    assert anyio.run(main, backend="asyncio") == 3 and RAN == [3]
