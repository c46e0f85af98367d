"""pydantic-ai drives the governed tools with its own FunctionModel through a full run: a safe
call, invalid arguments (ModelRetry), a risky call approved and one denied through
DeferredToolResults, the run resumed after a restart from its serialized message history, and
decisions made on toolkeeper's side resuming the run."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.capabilities.instrumentation import Instrumentation
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from toolkeeper import ToolInvoker
from toolkeeper.adapters.pydantic_ai import ToolkeeperCapability, ToolkeeperToolset
from toolkeeper.approval import ApprovalDecision

from .world import DELETED, World, add

pytestmark = pytest.mark.anyio

SEEN: list[list[str]] = []


def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The model: a bad call, then a safe one and two risky ones, then an answer; it notes
    what each tool result told it."""
    SEEN.append([f"{type(p).__name__}:{getattr(p, 'content', '')}" for p in messages[-1].parts])
    turn = sum(1 for m in messages if isinstance(m, ModelResponse))
    if turn == 0:
        return ModelResponse(parts=[ToolCallPart("add", {"a": "x", "b": 2}, tool_call_id="c1")])
    if turn == 1:
        return ModelResponse(parts=[
            ToolCallPart("add", {"a": 1, "b": 2}, tool_call_id="c2"),
            ToolCallPart("delete_file", {"path": "/keep"}, tool_call_id="c3"),
            ToolCallPart("delete_file", {"path": "/tmp/x"}, tool_call_id="c4")])
    return ModelResponse(parts=[TextPart("done")])


def agent(world: World) -> Agent[None, str | DeferredToolRequests]:
    governed = ToolkeeperCapability(world.invoker, session_id="conversation-1")
    return Agent(FunctionModel(script), capabilities=[governed],
                 output_type=[str, DeferredToolRequests])


async def test_a_full_run_approves_one_risky_call_and_denies_one_across_a_restart(
        tmp_path: Path) -> None:
    DELETED.clear()
    SEEN.clear()
    first = World(tmp_path / "state.db")
    run = await agent(first).run("clean up")
    requests = run.output
    assert isinstance(requests, DeferredToolRequests)
    assert [p.tool_call_id for p in requests.approvals] == ["c3", "c4"]
    assert requests.metadata["c3"]["approval_id"].startswith("apr_")
    assert DELETED == []  # nothing risky ran
    retry = SEEN[1][0]  # the invalid arguments came back as ModelRetry's prompt
    assert retry.startswith(("RetryPromptPart", "ToolReturnPart")) and \
        "argument 'a' must be a valid integer" in retry
    history = run.all_messages_json()

    again = World(tmp_path / "state.db")  # a restart: new invoker and store objects
    resumed = await agent(again).run(
        message_history=ModelMessagesTypeAdapter.validate_json(history),
        deferred_tool_results=DeferredToolResults(
            approvals={"c3": True, "c4": ToolDenied("not that one")}))
    assert resumed.output == "done"
    assert DELETED == ["/keep"]  # approved: ran once; denied: never
    assert "ToolReturnPart:deleted /keep" in SEEN[-1] and "ToolReturnPart:not that one" in SEEN[-1]
    assert again.decisions() == {"/keep": ("done", "pydantic-ai:user"),
                                 "/tmp/x": ("denied", "pydantic-ai:user")}
    rows = again.rows("delete_file")
    assert sorted((r.arguments["path"], r.status, r.approver or "") for r in rows) == [
        ("/keep", "ok", "pydantic-ai:user"), ("/keep", "pending", ""),
        ("/tmp/x", "denied", "pydantic-ai:user"), ("/tmp/x", "pending", "")]
    assert [r.status for r in again.rows("add")] == ["error", "ok"]


async def test_decisions_made_on_toolkeepers_side_resume_the_run(tmp_path: Path) -> None:
    DELETED.clear()
    world = World(tmp_path / "state.db")
    run = await agent(world).run("clean up")
    requests = run.output
    assert isinstance(requests, DeferredToolRequests)
    ids = {p.args_as_dict()["path"]: requests.metadata[p.tool_call_id]["approval_id"]
           for p in requests.approvals}
    world.store.decide(ApprovalDecision(request_id=ids["/keep"], outcome="approved",
                                        approver="web:alice"))
    governed = ToolkeeperToolset(world.invoker, session_id="conversation-1")
    partial = await governed.results_from_store(requests)
    assert list(partial.approvals) == ["c3"]  # the other still waits for a person
    world.store.decide(ApprovalDecision(request_id=ids["/tmp/x"], outcome="denied",
                                        approver="cli", message="no"))
    results = await governed.results_from_store(requests)
    resumed = await agent(world).run(message_history=run.all_messages(),
                                     deferred_tool_results=results)
    assert resumed.output == "done" and DELETED == ["/keep"]
    assert world.decisions() == {"/keep": ("done", "web:alice"), "/tmp/x": ("denied", "cli")}
    assert sorted((r.status, r.approver or "") for r in world.rows("delete_file")) == [
        ("denied", "cli"), ("ok", "web:alice"), ("pending", ""), ("pending", "")]


async def test_a_tool_that_fails_is_a_failed_result_and_the_run_goes_on(tmp_path: Path) -> None:
    world = World(tmp_path / "state.db")

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("fetch", {"url": "http://x"},
                                                     tool_call_id="c1")])
        last = messages[-1].parts[0]
        assert isinstance(last, ToolReturnPart) and last.outcome == "failed"  # ToolFailed
        return ModelResponse(parts=[TextPart(str(last.content))])

    result = await Agent(FunctionModel(model), toolsets=[ToolkeeperToolset(world.invoker)]).run("go")
    assert "cannot reach http://x" in result.output
    assert [r.status for r in world.rows("fetch")] == ["error"]


async def test_an_approval_that_edits_the_arguments_runs_the_edit_once_and_says_so(
        tmp_path: Path) -> None:
    DELETED.clear()
    SEEN.clear()
    world = World(tmp_path / "state.db")
    run = await agent(world).run("clean up")
    edited = DeferredToolResults(approvals={
        "c3": ToolApproved(override_args={"path": "/tmp/keep-copy"}), "c4": False})
    again = await agent(world).run(message_history=run.all_messages(),
                                   deferred_tool_results=edited)
    assert again.output == "done"  # nothing asked anew
    assert DELETED == ["/tmp/keep-copy"]  # the edit ran, once; the asked path never
    told = next(p for p in SEEN[-1] if "/tmp/keep-copy" in p)
    assert "a person edited the arguments" in told and "Changed: path" in told
    assert world.decisions() == {"/keep": ("done", "pydantic-ai:user"),
                                 "/tmp/x": ("denied", "pydantic-ai:user")}
    (ran,) = [r for r in world.rows("delete_file") if r.status == "ok"]
    assert ran.arguments == {"path": "/keep"} and "with edited arguments" in (ran.decision or "")


async def test_an_edit_made_on_toolkeepers_side_resumes_as_override_args(tmp_path: Path) -> None:
    DELETED.clear()
    world = World(tmp_path / "state.db")
    run = await agent(world).run("clean up")
    requests = run.output
    assert isinstance(requests, DeferredToolRequests)
    for request in world.store.pending():
        keep = request.arguments["path"] == "/keep"
        world.store.decide(ApprovalDecision(
            request_id=request.id, outcome="approved" if keep else "denied",
            approver="web:alice", arguments={"path": "/tmp/other"} if keep else None))
    governed = ToolkeeperToolset(world.invoker, session_id="conversation-1")
    results = await governed.results_from_store(requests)
    approved = results.approvals["c3"]
    assert isinstance(approved, ToolApproved) and approved.override_args == {"path": "/tmp/other"}
    resumed = await agent(world).run(message_history=run.all_messages(),
                                     deferred_tool_results=results)
    assert resumed.output == "done" and DELETED == ["/tmp/other"]
    assert world.decisions()["/keep"] == ("done", "web:alice")


async def test_with_pydantic_ais_instrumentation_a_call_has_one_execute_tool_span_ours_inside(
) -> None:
    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("add", {"a": 1, "b": 2},
                                                     tool_call_id="c1")])
        return ModelResponse(parts=[TextPart("3")])

    governed = ToolkeeperCapability(ToolInvoker([add], tracer_provider=provider))
    instrumented = Instrumentation(settings=InstrumentationSettings(tracer_provider=provider))
    agent = Agent(FunctionModel(model), capabilities=[instrumented, governed])
    assert (await agent.run("add 1 and 2")).output == "3"
    spans = exporter.get_finished_spans()
    tools = [s for s in spans if (s.attributes or {}).get("gen_ai.operation.name")
             == "execute_tool"]
    assert [s.name for s in tools] == ["execute_tool add"]  # pydantic-ai's, and only it
    [ours] = [s for s in spans if s.name == "toolkeeper.invoke add"]
    assert ours.parent is not None and ours.parent.span_id == tools[0].context.span_id
    attributes = dict(ours.attributes or {})
    assert attributes["gen_ai.tool.call.id"] == "c1" and attributes["toolkeeper.status"] == "ok"
