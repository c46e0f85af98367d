"""The one door: a fixed gate order, exactly one result and one trace record per call."""

from __future__ import annotations

import threading
import time

import anyio
import pytest

from toolkeeper import (
    ConfigError,
    HostedTool,
    ProviderDefinedTool,
    ToolResult,
    ToolRisk,
    is_hosted_tool,
    is_provider_defined_tool,
    tool,
)
from toolkeeper.codemode import ToolChainTool
from toolkeeper.core.context import ToolContext
from toolkeeper.invoke import ChainPolicy, ToolCall, ToolInvoker
from toolkeeper.invoke.builder import GATE_ORDER
from toolkeeper.invoke.policy import ChainPolicy as Policy
from toolkeeper.toolbox import Toolbox

from .helpers import THREADS, call, invoker, recording_hooks, toolbox

pytestmark = pytest.mark.anyio


def test_the_default_gate_order_is_pinned() -> None:
    expected = ["trace", "record", "errors", "budget", "lookup", "kind", "validate", "guardrails_in",
                "policy", "preflight", "approval", "artifact_refs", "cancellation", "shaping",
                "guardrails_out", "progress", "timeout"]
    assert list(GATE_ORDER) == expected
    assert [g.name for g in ToolInvoker([]).gates] == expected


async def test_a_valid_call_runs_and_is_traced_with_hooks() -> None:
    hooks, events = recording_hooks()
    inv = invoker(hooks=hooks)
    async with inv.open_session() as session:
        result = await inv.invoke(call("add", a=2, b="3"), session=session)
    assert (result.status, result.text, result.structured) == ("ok", "5", {"result": 5})
    (record,) = session.trace
    assert (record.tool, record.status, record.error_code) == ("add", "ok", None)
    assert len(record.args_digest) == 64
    assert [e for e, _ in events] == ["tool_start", "tool_end"]
    assert events[1][1]["status"] == "ok"


@pytest.mark.parametrize(
    ("name", "arguments", "status", "code", "fragment"),
    [
        ("ad", {}, "error", "unknown_tool", "did you mean 'add'"),
        ("add", {"a": 1}, "error", "invalid_arguments", "missing required argument 'b'"),
        ("add", {"a": 1, "b": 2, "c": 3}, "error", "invalid_arguments", "unknown argument 'c'"),
        ("boom", {"message": "disk full"}, "error", "tool_raised",
         "tool 'boom' failed: RuntimeError: disk full"),
        ("slow", {"seconds": 2}, "error", "timeout", "did not finish within 0.2 s"),
        ("delete_file", {"path": "/x"}, "denied", "denied", "no approval handler"),
    ],
)
async def test_every_failure_is_one_clear_result_and_one_trace_record(
    name: str, arguments: dict[str, object], status: str, code: str, fragment: str
) -> None:
    hooks, events = recording_hooks()
    inv = invoker(hooks=hooks)
    async with inv.open_session() as session:
        result = await inv.invoke(call(name, **arguments), session=session)
    assert (result.status, result.error_code) == (status, code)
    assert fragment in result.text
    assert "Traceback" not in result.text
    (record,) = session.trace
    assert record.status == ("timeout" if code == "timeout" else status)
    assert [e for e, _ in events] == ["tool_start", "tool_end"]


async def test_a_malformed_call_is_answered_not_raised() -> None:
    from toolkeeper.core.call import CallProblem

    inv = invoker()
    bad = ToolCall(id="x", name="add", problem=CallProblem(code="malformed_call",
                                                            message="arguments are not valid JSON"))
    async with inv.open_session() as session:
        result = await inv.invoke(bad, session=session)
    assert (result.status, result.error_code) == ("error", "malformed_call")


async def test_budgets_per_session_tool_and_namespace() -> None:
    inv = invoker(policy=Policy(max_tool_calls=2, tool_budgets={"add_inline": 1}))
    async with inv.open_session() as session:
        statuses = [(await inv.invoke(call(n, a=1, b=1), session=session)).error_code
                    for n in ("add_inline", "add_inline", "add", "add")]
    assert statuses == [None, "budget_exceeded", None, "budget_exceeded"]
    assert session.call_count == 2  # refused calls are not counted
    assert len(session.trace) == 4


async def test_sync_tools_run_in_worker_threads_unless_inline() -> None:
    inv = invoker()
    THREADS.clear()
    async with inv.open_session() as session:
        await inv.invoke(call("add", a=1, b=1), session=session)
        await inv.invoke(call("add_inline", a=1, b=1), session=session)
    loop_thread = threading.get_ident()
    assert THREADS[0] != loop_thread
    assert THREADS[1] == loop_thread


async def test_hosted_tools_are_not_run_and_provider_defined_tools_go_to_handle_call() -> None:
    class Computer(ProviderDefinedTool):
        async def handle_call(self, call: object, ctx: object) -> ToolResult:
            return ToolResult.text_result(f"clicked {call.arguments['x']}")  # type: ignore[attr-defined]

    hosted = HostedTool(name="web_search", provider_specs={"openai": {"type": "web_search"}})
    computer = Computer(name="computer", provider_specs={"openai": {"type": "computer"}},
                        risk=ToolRisk.SAFE, hitl_mode="none")
    inv = ToolInvoker(toolbox(hosted, computer))
    async with inv.open_session() as session:
        searched = await inv.invoke(call("web_search", q="x"), session=session)
        clicked = await inv.invoke(call("computer", x=3), session=session)
    assert (searched.status, searched.error_code) == ("error", "not_callable")
    assert clicked.text == "clicked 3"


async def test_cancelled_context_refuses_the_next_call() -> None:
    inv = invoker()
    ctx = ToolContext()
    ctx.cancel()
    async with inv.open_session() as session:
        result = await inv.invoke(call("add", a=1, b=1), session=session, ctx=ctx)
    assert (result.status, result.error_code) == ("error", "cancelled")


async def test_caller_cancellation_propagates_and_is_still_traced() -> None:
    inv = invoker()
    async with inv.open_session() as session:
        with anyio.move_on_after(0.05):
            await inv.invoke(call("slow", seconds=0.15), session=session)
    (record,) = session.trace
    assert record.error_code == "cancelled"


async def test_progress_sink_sees_tool_call_and_tool_result() -> None:
    steps: list[dict[str, object]] = []
    inv = invoker()
    async with inv.open_session() as session:
        await inv.invoke(call("add", a=1, b=2), session=session, progress_sink=steps.append)
    assert [s["type"] for s in steps] == ["tool_call", "tool_result"]
    assert steps[1]["status"] == "ok"


def test_policy_keeps_approval_timeout_below_call_timeout() -> None:
    with pytest.raises(ConfigError, match="approval_timeout_s"):
        ChainPolicy(approval_timeout_s=60, call_timeout_s=60)
    assert ChainPolicy().max_tool_calls == 50


def test_invoke_sync_from_plain_code() -> None:
    inv = invoker()
    session = inv.open_session()
    assert inv.invoke_sync(call("add", a=4, b=4), session=session).text == "8"


def test_invoke_sync_without_a_session_uses_a_one_off_session() -> None:
    inv = invoker()
    first = inv.invoke_sync(call("add", a=1, b=2))
    second = inv.invoke_sync(call("add", a=2, b=2))
    assert (first.status, first.text, second.text) == ("ok", "3", "4")


async def test_a_session_of_another_invoker_is_refused() -> None:
    from toolkeeper import UsageError

    with pytest.raises(UsageError, match="another invoker"):
        await invoker().invoke(call("add", a=1, b=1), session=invoker().open_session())


async def test_an_async_tool_past_its_deadline_is_stopped() -> None:
    @tool(timeout=0.2)
    async def nap(seconds: float) -> str:
        """Sleeps without blocking the loop."""
        await anyio.sleep(seconds)
        return "woke"

    inv = ToolInvoker(toolbox(nap))
    started = time.monotonic()
    async with inv.open_session() as session:
        result = await inv.invoke(call("nap", seconds=5), session=session)
        quick = await inv.invoke(call("nap", seconds=0.01), session=session)
    assert (result.status, result.error_code) == ("error", "timeout")
    assert quick.text == "woke"
    assert time.monotonic() - started < 2


async def test_time_before_the_first_await_counts_against_the_deadline() -> None:
    # The timer is armed only when the tool first suspends, but against the deadline fixed
    # when the call entered the gate: blocking work before the await is not free time.
    @tool(timeout=0.3)
    async def busy_then_nap() -> str:
        """Blocks the loop, then sleeps."""
        time.sleep(0.25)
        await anyio.sleep(1)
        return "done"

    inv = ToolInvoker(toolbox(busy_then_nap))
    started = time.monotonic()
    async with inv.open_session() as session:
        result = await inv.invoke(call("busy_then_nap"), session=session)
    assert result.error_code == "timeout"
    assert time.monotonic() - started < 0.6


async def test_a_tool_that_never_suspends_leaves_no_timer_behind() -> None:
    import asyncio

    inv = invoker()
    loop = asyncio.get_running_loop()
    async with inv.open_session() as session:
        before = len(loop._scheduled)  # type: ignore[attr-defined]
        for _ in range(50):
            assert (await inv.invoke(call("add_inline", a=1, b=2), session=session)).text == "3"
        assert len(loop._scheduled) == before  # type: ignore[attr-defined]


async def test_cancelling_a_suspended_async_tool_propagates_and_is_traced() -> None:
    @tool(timeout=10)
    async def wait_forever() -> str:
        """Never returns."""
        await anyio.sleep_forever()
        return "never"

    inv = ToolInvoker(toolbox(wait_forever))
    async with inv.open_session() as session:
        with anyio.move_on_after(0.1) as scope:
            await inv.invoke(call("wait_forever"), session=session)
        assert scope.cancelled_caught
        (record,) = session.trace
        assert record.error_code == "cancelled"


def test_an_invocation_is_immutable_and_evolve_copies_every_field() -> None:
    from toolkeeper.invoke.state import Invocation

    values = {name: object() for name in Invocation._fields}
    original = Invocation(**values)  # type: ignore[arg-type]
    copy = original.evolve(approval_id="a-1")
    assert copy is not original
    assert {n: getattr(copy, n) for n in Invocation._fields} == {**values, "approval_id": "a-1"}
    assert original.approval_id is values["approval_id"]
    with pytest.raises(AttributeError):
        original.approval_id = "changed"  # type: ignore[misc]


def _gate_names(chain: object) -> list[str]:
    names = []
    while hasattr(chain, "keywords"):
        names.append(chain.func.__self__.name)  # type: ignore[attr-defined]
        chain = chain.keywords["call_next"]
    return names


def test_each_tool_gets_a_chain_without_the_gates_it_cannot_need() -> None:
    from toolkeeper.artifacts import MemoryBlobStore

    hosted = HostedTool(name="web_search", provider_specs={"openai": {"type": "web_search"}})
    inv = ToolInvoker(toolbox(hosted))

    def chain(invoker: ToolInvoker, name: str) -> list[str]:
        return _gate_names(invoker._chain(name, invoker.registry.get(name), True, True))

    # shaping stays: a session's own limits (a code-mode run's) may cap any tool's result
    assert chain(inv, "add") == ["trace", "record", "errors", "budget", "validate",
                                 "cancellation", "shaping", "progress", "timeout"]
    assert "approval" in chain(inv, "delete_file")  # HIGH risk
    assert "kind" in chain(inv, "web_search")
    unknown = chain(inv, "no_such_tool")
    assert "lookup" in unknown and unknown[:4] == ["trace", "record", "errors", "budget"]
    stored = ToolInvoker(toolbox(), artifact_store=MemoryBlobStore())
    assert "shaping" in chain(stored, "add")


async def test_a_call_without_a_context_or_a_progress_sink_skips_the_gates_that_need_them(
) -> None:
    inv = invoker()
    tool_ = inv.registry.get("add")

    def gates(ctx: bool, sink: bool) -> list[str]:
        return _gate_names(inv._chain("add", tool_, ctx, sink))

    assert gates(False, False) == ["trace", "record", "errors", "budget", "validate",
                                   "shaping", "timeout"]
    assert "cancellation" in gates(True, False) and "progress" not in gates(True, False)
    assert "progress" in gates(False, True) and "cancellation" not in gates(False, True)
    # each kind of call still gets what those gates do, whichever came first
    steps: list[dict[str, object]] = []
    cancelled = ToolContext(call_id="c", tool_name="add")
    cancelled.cancel()
    async with inv.open_session() as session:
        assert (await inv.invoke(call("add", a=1, b=2), session=session)).text == "3"
        refused = await inv.invoke(call("add", a=1, b=2), session=session, ctx=cancelled)
        await inv.invoke(call("add", a=1, b=2), session=session, progress_sink=steps.append)
    assert refused.error_code == "cancelled" and not refused.ran
    assert [s["type"] for s in steps] == ["tool_call", "tool_result"]


async def test_a_tool_replaced_under_the_same_name_gets_its_own_chain() -> None:
    box = toolbox()

    @tool(name="deploy")
    def safe_deploy() -> str:
        """Pretend to deploy."""
        return "deployed"

    @tool(name="deploy", risk=ToolRisk.HIGH)
    def risky_deploy() -> str:
        """Really deploy."""
        return "deployed"

    box.add(safe_deploy)
    inv = ToolInvoker(box)
    async with inv.open_session() as session:
        assert (await inv.invoke(call("deploy"), session=session)).status == "ok"
        with pytest.warns(UserWarning, match="deploy"):
            box.add(risky_deploy)
        result = await inv.invoke(call("deploy"), session=session)
    assert (result.status, result.error_code) == ("denied", "denied")


async def test_a_long_lived_session_keeps_a_bounded_trace() -> None:
    inv = invoker()
    session = inv.open_session(trace_limit=3)
    calls = [call("add", a=i, b=0) for i in range(5)]
    for one in calls:
        await inv.invoke(one, session=session)
    assert [r.call_id for r in session.trace] == [c.id for c in calls[2:]]
    assert session.call_count == 5


async def test_a_session_limited_to_some_tools_refuses_the_others_and_records_them() -> None:
    inv = invoker()
    async with inv.open_session() as session:
        session.tools = frozenset({"add"})
        allowed = await inv.invoke(call("add", a=1, b=2), session=session)
        refused = await inv.invoke(call("boom", message="x"), session=session)
        unknown = await inv.invoke(call("nope"), session=session)
    assert allowed.ok
    assert (refused.status, refused.error_code) == ("denied", "policy_violation")
    assert "'boom' is not callable in this session (callable: add)" in refused.text
    assert unknown.error_code == "unknown_tool"
    assert [(r.tool, r.status) for r in session.trace] == [
        ("add", "ok"), ("boom", "denied"), ("nope", "error")]


async def test_the_type_gate_refuses_hosted_provider_defined_and_tool_chain_in_a_chain() -> None:
    """The type gate: in a chain session, is_hosted_tool, is_provider_defined_tool and the
    recursive tool_chain name are refused with status="error" — can't call from a chain."""
    class Computer(ProviderDefinedTool):
        async def handle_call(self, call: object, ctx: object) -> ToolResult:
            return ToolResult.text_result("clicked")

    hosted = HostedTool(name="web_search", provider_specs={"openai": {"type": "web_search"}})
    computer = Computer(name="computer", provider_specs={"openai": {"type": "computer"}},
                        risk=ToolRisk.SAFE, hitl_mode="none")
    invoker = ToolInvoker(toolbox(hosted, computer))
    chain_tool = ToolChainTool(invoker)
    assert isinstance(invoker.registry, Toolbox)
    invoker.registry.add(chain_tool)
    async with invoker.open_session(chain=True) as session:
        results = [await invoker.invoke(call(name, x=1), session=session)
                   for name in ("web_search", "computer", "tool_chain")]
    for result in results:
        assert (result.status, result.error_code) == ("error", "not_callable")
        assert "cannot be called from a chain: call it outside the chain" in result.text
    assert is_hosted_tool(hosted) and is_provider_defined_tool(computer)
    async with invoker.open_session() as session:  # outside a chain, the provider tool runs
        clicked = await invoker.invoke(call("computer", x=1), session=session)
    assert clicked.text == "clicked"
