"""The per-call context is resolved once at the door: a session's own limits (a code-mode
run's) reach every gate — shaping, timeouts, approval — and the invoker's are used only where
the session has none."""

from __future__ import annotations

import anyio
import pytest

from toolkeeper import Toolbox, ToolContext, ToolInvoker, tool
from toolkeeper.core.context import LIBRARY, Caller
from toolkeeper.invoke import ChainPolicy, InvocationResult
from toolkeeper.invoke.state import Gate, Invocation, Next

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


class _Stamp(Gate):
    """An extra gate that records where in the pipeline it ran."""

    def __init__(self, name: str, **anchor: str) -> None:
        self.name = name
        self.after, self.before = anchor.get("after"), anchor.get("before")

    async def __call__(self, inv: Invocation, call_next: Next) -> InvocationResult:
        STAMPS.append((self.name, inv.arguments))
        return await call_next(inv)


STAMPS: list[tuple[str, object]] = []


async def test_an_extra_gate_goes_where_it_says_and_the_default_order_holds() -> None:
    from toolkeeper.invoke.builder import GATE_ORDER

    invoker = ToolInvoker([long_text], extra_gates=[
        _Stamp("audit_more", after="validate"), _Stamp("innermost", before="execute"),
        _Stamp("outer", before="budget")])
    names = [g.name for g in invoker.gates]
    assert [n for n in names if n in GATE_ORDER] == list(GATE_ORDER)
    assert names[names.index("validate") + 1] == "audit_more"
    assert names[-1] == "innermost" and names[names.index("budget") - 1] == "outer"
    STAMPS.clear()
    async with invoker.open_session() as session:
        result = await invoker.invoke(call("long_text", n="3"), session=session)
    assert result.ok and [s[0] for s in STAMPS] == ["outer", "audit_more", "innermost"]
    assert STAMPS[1][1] == {"n": 3}  # after validation: the coerced arguments


@pytest.mark.parametrize("anchor", [{}, {"after": "nowhere"},
                                    {"after": "validate", "before": "timeout"}])
def test_an_extra_gate_without_a_valid_anchor_is_refused(anchor: dict[str, str]) -> None:
    from toolkeeper.errors import UsageError

    with pytest.raises(UsageError, match="extra gate 'stray'"):
        ToolInvoker([long_text], extra_gates=[_Stamp("stray", **anchor)])


async def test_a_script_may_not_call_the_tool_that_runs_scripts() -> None:
    from toolkeeper.codemode import ToolChainTool

    invoker = ToolInvoker([long_text])
    chain = ToolChainTool(invoker, tools=["long_text"])
    assert isinstance(invoker.registry, Toolbox)
    invoker.registry.add(chain)
    async with invoker.open_session(chain=True) as session:
        nested = await invoker.invoke(call("tool_chain", code="result = 1"), session=session)
    assert nested.status == "error" and not nested.ran
    assert "cannot be called from a chain" in nested.text


async def test_a_caller_limited_to_some_tools_calls_only_those_through_any_session() -> None:
    invoker = ToolInvoker([long_text, slow])
    scoped = Caller(client="oauth:agent", channel="mcp", tools=("long_*",))
    async with invoker.open_session(caller=scoped) as session:
        allowed = await invoker.invoke(call("long_text", n=3), session=session)
        refused = await invoker.invoke(call("slow", seconds=0), session=session)
    async with invoker.open_session() as unscoped:  # the request's caller decides, not the session's
        by_ctx = await invoker.invoke(call("slow", seconds=0), session=unscoped,
                                      ctx=ToolContext(caller=scoped))
    assert allowed.ok and scoped.through("code_mode").tools == ("long_*",)
    for result in (refused, by_ctx):
        assert (result.status, result.error_code) == ("denied", "policy_violation")
        assert "not among the tools client 'oauth:agent' may call" in result.text
    assert LIBRARY.may_use("slow") and not scoped.may_use("slow")


async def test_a_limited_caller_misnaming_a_tool_hears_no_name_it_may_not_see() -> None:
    invoker = ToolInvoker([long_text, slow])
    exported = invoker.registry.export("mcp")
    scoped = Caller(client="oauth:agent", tools=("long_*",))
    async with invoker.open_session(caller=scoped) as session:
        for name in ("slo", "slow_"):  # one near the hidden tool's name, one past it
            (misnamed,) = exported.parse({"method": "tools/call", "id": name, "params": {
                "name": name, "arguments": {}}})
            result = await invoker.invoke(misnamed, session=session)
            assert result.error_code == "policy_violation" and "slow'" not in result.text
            assert f"tool '{name}' is not among the tools" in result.text
