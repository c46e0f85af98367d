"""LangChain's create_agent drives the governed tools with LangChain's own fake chat model
through a full run: a safe call, invalid arguments (a ToolMessage with status "error"), a risky
call approved and one rejected through LangGraph's interrupt and Command(resume=...), the run
resumed after a restart from a SQLite checkpointer, and decisions made on toolkeeper's side
resuming the graph."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command

from toolkeeper.adapters.langchain import ToolkeeperTools, decision_of, edited_arguments
from toolkeeper.approval import ApprovalDecision

from .world import DELETED, World

pytestmark = pytest.mark.anyio
THREAD: RunnableConfig = {"configurable": {"thread_id": "conversation-1"}}


class ScriptedChatModel(FakeMessagesListChatModel):
    """LangChain's fake chat model; the tools are bound by the agent, the script is fixed."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def script(start: int = 0) -> ScriptedChatModel:
    model = ScriptedChatModel(responses=[
        AIMessage("", tool_calls=[{"name": "add", "args": {"a": "x", "b": 2}, "id": "c1"}]),
        AIMessage("", tool_calls=[
            {"name": "add", "args": {"a": 1, "b": 2}, "id": "c2"},
            {"name": "delete_file", "args": {"path": "/keep"}, "id": "c3"},
            {"name": "delete_file", "args": {"path": "/tmp/x"}, "id": "c4"}]),
        AIMessage("done")])
    model.i = start
    return model


def tool_messages(messages: list[BaseMessage]) -> dict[str, tuple[str, str]]:
    return {m.tool_call_id: (m.status, str(m.content)) for m in messages
            if isinstance(m, ToolMessage)}


async def test_a_full_run_approves_one_risky_call_and_rejects_one_across_a_restart(
        tmp_path: Path) -> None:
    DELETED.clear()
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "graph.db")) as saver:
        first = World(tmp_path / "state.db")
        governed = ToolkeeperTools(first.invoker, session_id="conversation-1")
        graph = create_agent(script(), governed.tools, checkpointer=saver)
        run = await graph.ainvoke({"messages": [{"role": "user", "content": "clean up"}]},
                                  THREAD)
        asked = run["__interrupt__"]
        assert sorted(i.value["action_requests"][0]["args"]["path"] for i in asked) == [
            "/keep", "/tmp/x"]
        assert all(i.value["approval_id"].startswith("apr_") for i in asked)
        told = tool_messages(run["messages"])
        assert told["c1"][0] == "error" and "argument 'a' must be a valid integer" in told["c1"][1]
        assert DELETED == []

    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "graph.db")) as saver:
        again = World(tmp_path / "state.db")  # a restart: new invoker, store and checkpointer
        governed = ToolkeeperTools(again.invoker, session_id="conversation-1")
        graph = create_agent(script(start=2), governed.tools, checkpointer=saver)
        waiting = [i for task in (await graph.aget_state(THREAD)).tasks for i in task.interrupts]
        resume = {i.id: {"decisions": [{"type": "approve"}]}
                  if i.value["action_requests"][0]["args"]["path"] == "/keep"
                  else {"decisions": [{"type": "reject", "message": "not that one"}]}
                  for i in waiting}
        done = await graph.ainvoke(Command(resume=resume), THREAD)
    assert done["messages"][-1].content == "done"
    assert DELETED == ["/keep"]
    told = tool_messages(done["messages"])
    assert told["c3"] == ("success", "deleted /keep") and told["c2"] == ("success", "3")
    assert told["c4"][0] == "error" and "not that one" in told["c4"][1]
    assert again.decisions() == {"/keep": ("done", "langgraph:user"),
                                 "/tmp/x": ("denied", "langgraph:user")}
    assert sorted((r.arguments["path"], r.status, r.approver or "")
                  for r in again.rows("delete_file")) == [
        ("/keep", "ok", "langgraph:user"), ("/keep", "pending", ""),
        ("/tmp/x", "denied", "langgraph:user"), ("/tmp/x", "pending", "")]
    assert [r.status for r in again.rows("add")] == ["error", "ok"]  # each call ran once


async def test_decisions_made_on_toolkeepers_side_resume_the_graph(tmp_path: Path) -> None:
    DELETED.clear()
    world = World(tmp_path / "state.db")
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "graph.db")) as saver:
        governed = ToolkeeperTools(world.invoker, session_id="conversation-1")
        graph = create_agent(script(), governed.tools, checkpointer=saver)
        run = await graph.ainvoke({"messages": [{"role": "user", "content": "clean up"}]},
                                  THREAD)
        assert await governed.resume_from_store(run["__interrupt__"]) is None
        for request in world.store.pending("conversation-1"):
            keep = request.arguments["path"] == "/keep"
            world.store.decide(ApprovalDecision(request_id=request.id, approver="web:alice",
                                                outcome="approved" if keep else "denied",
                                                message="" if keep else "no"))
        command = await governed.resume_from_store(run["__interrupt__"])
        assert command is not None
        done = await graph.ainvoke(command, THREAD)
    assert done["messages"][-1].content == "done" and DELETED == ["/keep"]
    assert world.decisions() == {"/keep": ("done", "web:alice"), "/tmp/x": ("denied", "web:alice")}


def test_a_resume_value_that_is_not_a_decision_denies_and_says_what_to_send() -> None:
    assert decision_of({"decisions": [{"type": "approve"}]}) == (True, "")
    assert decision_of({"type": "reject", "message": "no"}) == (False, "no")
    assert decision_of(True) == (True, "")
    approved, message = decision_of({"type": "maybe"})
    assert not approved and "resume with {'decisions': [{'type': 'approve'}]}" in message
    approved, message = decision_of({"type": "edit"})  # an edit without its arguments
    assert not approved and "edited_action" in message
    edit = {"decisions": [{"type": "edit", "edited_action": {"name": "x", "args": {"a": 1}}}]}
    assert decision_of(edit) == (True, "") and edited_arguments(edit) == {"a": 1}


async def test_an_edit_decision_runs_the_edited_call_once_and_says_so(tmp_path: Path) -> None:
    DELETED.clear()
    world = World(tmp_path / "state.db")
    governed = ToolkeeperTools(world.invoker, session_id="conversation-1")
    graph = create_agent(script(), governed.tools, checkpointer=InMemorySaver())
    run = await graph.ainvoke({"messages": [{"role": "user", "content": "clean up"}]}, THREAD)
    asked = run["__interrupt__"]
    configs = asked[0].value["review_configs"][0]["allowed_decisions"]
    assert configs == ["approve", "edit", "reject"]
    resume = {i.id: {"decisions": [
        {"type": "edit", "edited_action": {"name": "delete_file",
                                           "args": {"path": "/tmp/keep-copy"}}}
        if i.value["action_requests"][0]["args"]["path"] == "/keep"
        else {"type": "reject", "message": "no"}]} for i in asked}
    done = await graph.ainvoke(Command(resume=resume), THREAD)
    assert done["messages"][-1].content == "done"
    assert DELETED == ["/tmp/keep-copy"]  # the edit ran once; nothing was asked anew
    told = tool_messages(done["messages"])["c3"]
    assert told[0] == "success" and "a person edited the arguments" in told[1]
    assert world.decisions() == {"/keep": ("done", "langgraph:user"),
                                 "/tmp/x": ("denied", "langgraph:user")}


async def test_an_edit_made_on_toolkeepers_side_resumes_the_graph_as_an_edit(
        tmp_path: Path) -> None:
    DELETED.clear()
    world = World(tmp_path / "state.db")
    governed = ToolkeeperTools(world.invoker, session_id="conversation-1")
    graph = create_agent(script(), governed.tools, checkpointer=InMemorySaver())
    run = await graph.ainvoke({"messages": [{"role": "user", "content": "clean up"}]}, THREAD)
    for request in world.store.pending("conversation-1"):
        keep = request.arguments["path"] == "/keep"
        world.store.decide(ApprovalDecision(
            request_id=request.id, outcome="approved" if keep else "denied",
            approver="web:alice", arguments={"path": "/tmp/other"} if keep else None))
    command = await governed.resume_from_store(run["__interrupt__"])
    assert command is not None and isinstance(command.resume, dict), command
    edits = [d for v in command.resume.values() for d in v["decisions"] if d["type"] == "edit"]
    assert edits == [{"type": "edit", "edited_action": {"name": "delete_file",
                                                        "args": {"path": "/tmp/other"}}}]
    done = await graph.ainvoke(command, THREAD)
    assert done["messages"][-1].content == "done" and DELETED == ["/tmp/other"]


async def test_a_failing_tool_is_an_error_tool_message(tmp_path: Path) -> None:
    governed = ToolkeeperTools(World(tmp_path / "state.db").invoker)
    fetch = next(t for t in governed.tools if t.name == "fetch")
    told = await fetch.ainvoke({"type": "tool_call", "id": "c1", "name": "fetch",
                                "args": {"url": "http://x"}})
    assert isinstance(told, ToolMessage) and told.status == "error"
    assert told.tool_call_id == "c1" and "cannot reach http://x" in str(told.content)


def test_a_graph_run_with_invoke_interrupts_for_two_risky_calls_and_resumes_by_their_ids(
        tmp_path: Path) -> None:
    DELETED.clear()
    world = World(tmp_path / "state.db")
    governed = ToolkeeperTools(world.invoker, session_id="conversation-1")
    graph = create_agent(script(), governed.tools, checkpointer=InMemorySaver())
    run = graph.invoke({"messages": [{"role": "user", "content": "clean up"}]}, THREAD)
    asked = run.get("__interrupt__", [])
    assert len(asked) == 2, tool_messages(run["messages"])  # one interrupt per risky call
    where = f"toolkeeper approvals decide {asked[0].value['approval_id']} approve --db"
    assert where in asked[0].value["action_requests"][0]["description"]
    resume = {i.id: {"decisions": [{"type": "approve"}]}
              if i.value["action_requests"][0]["args"]["path"] == "/keep"
              else {"decisions": [{"type": "reject", "message": "not that one"}]}
              for i in asked}
    done = graph.invoke(Command(resume=resume), THREAD)
    assert done["messages"][-1].content == "done" and DELETED == ["/keep"]
    told = tool_messages(done["messages"])
    assert told["c2"] == ("success", "3") and told["c3"] == ("success", "deleted /keep")
    assert told["c4"][0] == "error" and "not that one" in told["c4"][1]
    assert world.decisions() == {"/keep": ("done", "langgraph:user"),
                                 "/tmp/x": ("denied", "langgraph:user")}
    assert sorted(r.call_id for r in world.rows("delete_file")) == ["c3", "c3", "c4", "c4"]


def test_decisions_made_on_toolkeepers_side_resume_a_graph_run_with_invoke(
        tmp_path: Path) -> None:
    DELETED.clear()
    world = World(tmp_path / "state.db")
    governed = ToolkeeperTools(world.invoker, session_id="conversation-1")
    graph = create_agent(script(), governed.tools, checkpointer=InMemorySaver())
    run = graph.invoke({"messages": [{"role": "user", "content": "clean up"}]}, THREAD)
    for request in world.store.pending("conversation-1"):
        world.store.decide(ApprovalDecision(request_id=request.id, approver="web:alice",
                                            outcome="approved"))
    command = governed.resume_from_store_sync(run["__interrupt__"])
    assert command is not None
    done = graph.invoke(command, THREAD)
    assert done["messages"][-1].content == "done" and sorted(DELETED) == ["/keep", "/tmp/x"]


def test_a_tool_called_with_invoke_runs_through_the_door(tmp_path: Path) -> None:
    world = World(tmp_path / "state.db")
    governed = ToolkeeperTools(world.invoker)
    add = next(t for t in governed.tools if t.name == "add")
    told = add.invoke({"type": "tool_call", "id": "c9", "name": "add", "args": {"a": 1, "b": 2}})
    assert isinstance(told, ToolMessage) and told.content == "3"
    assert [(r.call_id, r.status) for r in world.rows("add")] == [("c9", "ok")]


async def test_a_call_waiting_for_approval_outside_a_graph_says_what_to_do(
        tmp_path: Path) -> None:
    DELETED.clear()
    governed = ToolkeeperTools(World(tmp_path / "state.db").invoker)
    delete = next(t for t in governed.tools if t.name == "delete_file")
    told = await delete.ainvoke({"path": "/keep"})
    assert "outside a LangGraph run nothing can stop for it" in told
    assert "Run the tool in a graph with a checkpointer" in told and DELETED == []
