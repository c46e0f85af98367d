"""The per-call context is resolved once at the door: a session's own limits (a code-mode
run's) reach every gate — shaping, timeouts, approval — and the invoker's are used only where
the session has none."""

from __future__ import annotations

import anyio
import pytest

from toolkeeper import ToolContext, ToolInvoker, tool
from toolkeeper.core.context import LIBRARY, Caller
from toolkeeper.invoke import ChainPolicy

from .helpers import call

pytestmark = pytest.mark.anyio


@tool
def long_text(n: int) -> str:
    """Return n characters."""
    return "x" * n


@tool
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await anyio.sleep(seconds)
    return "done"


async def test_a_chains_limits_reach_result_shaping_and_timeouts() -> None:
    invoker = ToolInvoker([long_text, slow])  # the invoker's own: no result cap, 60 s per call
    strict = ChainPolicy(max_result_size=100, truncation="head", call_timeout_s=0.3,
                         approval_timeout_s=0.2)
    async with invoker.open_session() as ordinary:
        whole = await invoker.invoke(call("long_text", n=1000), session=ordinary)
        waited = await invoker.invoke(call("slow", seconds=0.5), session=ordinary)
    async with invoker.open_session(chain=True, policy=strict) as chained:
        assert chained.policy is strict
        cut = await invoker.invoke(call("long_text", n=1000), session=chained)
        stopped = await invoker.invoke(call("slow", seconds=0.5), session=chained)
    assert whole.ok and whole.text == "x" * 1000
    assert waited.ok and waited.text == "done"
    assert cut.ok and cut.text.startswith("x" * 100) and "900 characters truncated" in cut.text
    assert stopped.status == "error" and stopped.error_code == "timeout"
    assert "within 0.3 s" in stopped.text


async def test_a_session_without_limits_of_its_own_takes_the_invokers() -> None:
    invoker = ToolInvoker([long_text], policy=ChainPolicy(max_result_size=10, truncation="head"))
    async with invoker.open_session() as session:
        assert session.policy is invoker.policy
        cut = await invoker.invoke(call("long_text", n=50), session=session)
    assert cut.text.startswith("x" * 10) and "40 characters truncated" in cut.text


SEEN: list[object] = []


@tool
def whoami(ctx: ToolContext) -> str:
    """Say who calls."""
    SEEN.append(ctx.caller)
    return ctx.caller.client or "a program"


async def test_the_caller_is_typed_and_reaches_the_tool_through_its_session() -> None:
    invoker = ToolInvoker([whoami])
    alice = Caller(client="alice", channel="mcp", via="bearer")
    SEEN.clear()
    async with invoker.open_session(session_id="client-alice", caller=alice) as session:
        named = await invoker.invoke(call("whoami"), session=session)
    async with invoker.open_session() as session:
        anonymous = await invoker.invoke(call("whoami"), session=session)
    assert named.text == "alice" and SEEN[0] is alice and not alice.is_operator
    assert anonymous.text == "a program" and SEEN[1] == LIBRARY
    script = alice.through("code_mode")
    assert (script.client, script.channel, script.via) == ("alice", "code_mode", "bearer")
