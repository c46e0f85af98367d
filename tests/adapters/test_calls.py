"""What the three adapters share (GovernedCalls): a decision is recorded once and the first one
stands, whichever side made it; nothing runs that a person did not approve; an expired request
asks anew; one session carries the budget across the framework's calls."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from toolkeeper import ChainPolicy, ToolContext, ToolInvoker, UsageError, tool
from toolkeeper.adapters import GovernedCalls
from toolkeeper.approval import ApprovalDecision

from .world import DELETED, World

pytestmark = pytest.mark.anyio
KEEP = {"path": "/keep"}


async def asked(world: World) -> tuple[GovernedCalls, str]:
    calls = GovernedCalls(world.invoker, framework="test-fw", session_id="s1")
    pending = await calls.call("delete_file", KEEP, "c1")
    assert pending.status == "pending" and pending.approval_id is not None
    return calls, pending.approval_id


async def test_a_framework_approval_runs_the_call_once_and_signs_it(tmp_path: Path) -> None:
    DELETED.clear()
    world = World(tmp_path / "state.db")
    calls, request_id = await asked(world)
    ran = await calls.decided("delete_file", KEEP, "c1", approved=True)
    assert ran.status == "ok" and ran.text == "deleted /keep"
    again = await calls.decided("delete_file", KEEP, "c1", approved=True)  # the framework
    assert again.status == "ok" and "does not run twice" in again.text   # retries the call
    assert DELETED == ["/keep"]
    stored = world.store.get(request_id)
    assert stored is not None and stored.state == "done"
    assert stored.decision is not None and stored.decision.approver == "test-fw:user"


async def test_a_decision_made_on_toolkeepers_side_first_stands(tmp_path: Path) -> None:
    DELETED.clear()
    world = World(tmp_path / "state.db")
    calls, request_id = await asked(world)
    world.store.decide(ApprovalDecision(request_id=request_id, outcome="denied",
                                        approver="web:alice", message="not today"))
    result = await calls.decided("delete_file", KEEP, "c1", approved=True)
    assert result.status == "denied" and "not today" in result.text
    assert DELETED == []
    stored = world.store.get(request_id)
    assert stored is not None and stored.decision is not None
    assert stored.decision.approver == "web:alice"


async def test_a_framework_denial_of_a_call_approved_on_the_page_runs_nothing(
        tmp_path: Path) -> None:
    DELETED.clear()
    world = World(tmp_path / "state.db")
    calls, request_id = await asked(world)
    world.store.decide(ApprovalDecision(request_id=request_id, outcome="approved",
                                        approver="web:alice"))
    result = await calls.decided("delete_file", KEEP, "c1", approved=False, message="wait")
    assert result.status == "denied" and "denied in test-fw" in result.text
    assert DELETED == []
    stored = world.store.get(request_id)
    assert stored is not None and stored.state == "approved"  # still the page's, not run


async def test_a_late_approval_of_an_expired_request_asks_anew(tmp_path: Path) -> None:
    DELETED.clear()
    world = World(tmp_path / "state.db")
    calls, request_id = await asked(world)
    world.store.decide(ApprovalDecision(request_id=request_id, outcome="expired"))
    # what its time-to-live does
    result = await calls.decided("delete_file", KEEP, "c1", approved=True)
    assert result.status == "pending" and result.approval_id != request_id
    assert DELETED == []


async def test_one_session_carries_the_budget_across_the_frameworks_calls(
        tmp_path: Path) -> None:
    world = World(tmp_path / "state.db", policy=ChainPolicy(max_tool_calls=1))
    calls = GovernedCalls(world.invoker, framework="test-fw")
    assert (await calls.call("add", {"a": 1, "b": 2}, "c1")).text == "3"
    over = await calls.call("add", {"a": 1, "b": 2}, "c2")
    assert over.error_code == "budget_exceeded"


async def test_an_unknown_name_is_answered_by_the_door(tmp_path: Path) -> None:
    calls = GovernedCalls(World(tmp_path / "state.db").invoker, framework="test-fw")
    result = await calls.call("ad", {}, "c1")
    assert result.error_code == "unknown_tool" and "add" in result.text


def test_the_tools_are_declared_by_our_own_export(tmp_path: Path) -> None:
    calls = GovernedCalls(World(tmp_path / "state.db").invoker, framework="test-fw")
    add = next(d for d in calls.declared if d.name == "add")
    assert add.description == "Add two integers."
    assert add.parameters["required"] == ["a", "b"]


def test_an_adapter_needs_a_tool_invoker() -> None:
    with pytest.raises(UsageError, match="the test-fw adapter needs a ToolInvoker, got list"):
        GovernedCalls([], framework="test-fw")  # type: ignore[arg-type]


async def test_a_tool_reads_the_framework_as_its_caller(tmp_path: Path) -> None:
    @tool
    def whoami(ctx: ToolContext) -> str:
        """Say who calls."""
        return ctx.caller.client

    calls = GovernedCalls(ToolInvoker([whoami]), framework="test-fw")
    assert (await calls.call("whoami", {}, "c1")).text == "test-fw"


async def test_a_framework_denial_of_an_expired_request_asks_nobody_anew(tmp_path: Path) -> None:
    world = World(tmp_path / "state.db")
    calls, request_id = await asked(world)
    world.store.decide(ApprovalDecision(request_id=request_id, outcome="expired"))
    result = await calls.decided("delete_file", KEEP, "c1", approved=False)
    assert result.status == "denied"
    assert [s.state for s in world.store.requests()] == ["expired"]  # no new request


@pytest.mark.parametrize(("module", "framework", "extra"), [
    ("pydantic_ai", "pydantic_ai", "pydantic-ai"),
    ("openai_agents", "agents", "openai-agents"),
    ("langchain", "langgraph", "langchain")])
def test_an_adapter_without_its_framework_names_the_extra_to_install(
        module: str, framework: str, extra: str) -> None:
    missing = (f"import sys; sys.modules[{framework!r}] = None; "
               f"import toolkeeper.adapters.{module}")
    run = subprocess.run([sys.executable, "-c", missing], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1].endswith(f"pip install 'toolkeeper[{extra}]'")


def test_the_adapters_package_imports_no_framework() -> None:
    probe = ("import sys, toolkeeper.adapters; "
             "print(sorted({'pydantic_ai', 'agents', 'langgraph', 'langchain_core'} & "
             "set(sys.modules)))")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120)
    assert run.stdout.strip() == "[]", run.stderr
