"""The OpenAI Agents SDK drives the governed tools with a fake Model of its own interface
through a full run: a safe call, invalid arguments (an error output the model reads), a risky
call approved and one rejected through RunState, the run resumed after a restart from
RunState JSON, and decisions made on toolkeeper's side resuming the run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, RunState, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from toolkeeper import AutoApprovalHandler, ToolInvoker
from toolkeeper.adapters.openai_agents import ToolkeeperTools
from toolkeeper.approval import ApprovalDecision

from .world import DELETED, World, delete_file

pytestmark = pytest.mark.anyio
set_tracing_disabled(True)


def call(call_id: str, name: str, arguments: dict[str, Any]) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(type="function_call", id=f"fc_{call_id}", call_id=call_id,
                                    name=name, arguments=json.dumps(arguments),
                                    status="completed")


def say(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(type="message", id="msg", role="assistant", status="completed",
                                 content=[ResponseOutputText(type="output_text", text=text,
                                                             annotations=[])])


class ScriptedModel(Model):
    """The SDK's Model interface answering from a script; keeps what it was sent."""

    def __init__(self, turns: list[list[Any]]) -> None:
        self.turns = turns
        self.inputs: list[Any] = []

    async def get_response(self, system_instructions: Any, input: Any, model_settings: Any,
                           tools: Any, output_schema: Any, handoffs: Any, tracing: Any,
                           **kwargs: Any) -> ModelResponse:
        self.inputs.append(input)
        items = input if isinstance(input, list) else []
        made = {i.get("call_id") for i in items if isinstance(i, dict)
                and i.get("type") == "function_call"}
        turn = 0 if not made else 1 if "c2" not in made else 2
        return ModelResponse(output=self.turns[turn], usage=Usage(),
                             response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


TURNS: list[list[Any]] = [[call("c1", "add", {"a": "x", "b": 2})],
         [call("c2", "add", {"a": 1, "b": 2}), call("c3", "delete_file", {"path": "/keep"}),
          call("c4", "delete_file", {"path": "/tmp/x"})],
         [say("done")]]


def outputs(model: ScriptedModel) -> dict[str, str]:
    return {i["call_id"]: str(i["output"]) for i in model.inputs[-1]
            if isinstance(i, dict) and i.get("type") == "function_call_output"}


def agent(world: World) -> tuple[Agent[Any], ToolkeeperTools, ScriptedModel]:
    governed = ToolkeeperTools(world.invoker, session_id="conversation-1")
    model = ScriptedModel(TURNS)
    return Agent(name="ops", model=model, tools=[*governed.tools], hooks=governed.hooks), \
        governed, model


async def test_a_full_run_approves_one_risky_call_and_rejects_one_across_a_restart(
        tmp_path: Path) -> None:
    DELETED.clear()
    first = World(tmp_path / "state.db")
    ops, _, model = agent(first)
    run = await Runner.run(ops, "clean up")
    assert [i.raw_item.call_id for i in run.interruptions] == ["c3", "c4"]  # type: ignore[union-attr]
    assert DELETED == []
    told = outputs(model)
    assert "argument 'a' must be a valid integer" in told["c1"]  # an error output, no crash
    saved = json.dumps(run.to_state().to_json())

    again = World(tmp_path / "state.db")  # a restart: new invoker and store objects
    ops, _, model = agent(again)
    state = await RunState.from_json(ops, json.loads(saved))
    for item in state.get_interruptions():
        if item.raw_item.call_id == "c3":  # type: ignore[union-attr]
            state.approve(item)
        else:
            state.reject(item, rejection_message="not that one")
    resumed = await Runner.run(ops, state)
    assert resumed.final_output == "done"
    assert DELETED == ["/keep"]
    told = outputs(model)
    assert told["c3"] == "deleted /keep" and told["c4"] == "not that one" and told["c2"] == "3"
    assert again.decisions() == {"/keep": ("done", "openai-agents:user"),
                                 "/tmp/x": ("denied", "openai-agents:user")}
    assert sorted((r.arguments["path"], r.status, r.approver or "")
                  for r in again.rows("delete_file")) == [
        ("/keep", "ok", "openai-agents:user"), ("/keep", "pending", ""),
        ("/tmp/x", "denied", "openai-agents:user"), ("/tmp/x", "pending", "")]
    assert [r.status for r in again.rows("add")] == ["error", "ok"]  # each call ran once


async def test_decisions_made_on_toolkeepers_side_resume_the_run(tmp_path: Path) -> None:
    DELETED.clear()
    world = World(tmp_path / "state.db")
    ops, governed, _ = agent(world)
    run = await Runner.run(ops, "clean up")
    state = run.to_state()
    assert await governed.apply_store_decisions(state) == 0  # nobody decided yet
    for request in world.store.pending("conversation-1"):
        keep = request.arguments["path"] == "/keep"
        world.store.decide(ApprovalDecision(request_id=request.id, approver="web:alice",
                                            outcome="approved" if keep else "denied",
                                            message="" if keep else "no"))
    assert await governed.apply_store_decisions(state) == 2
    resumed = await Runner.run(ops, state)
    assert resumed.final_output == "done" and DELETED == ["/keep"]
    assert world.decisions() == {"/keep": ("done", "web:alice"), "/tmp/x": ("denied", "web:alice")}


async def test_broken_arguments_and_a_failing_tool_are_error_outputs(tmp_path: Path) -> None:
    world = World(tmp_path / "state.db")
    governed = ToolkeeperTools(world.invoker)
    broken = ResponseFunctionToolCall(type="function_call", id="fc_c1", call_id="c1",
                                      name="add", arguments="{not json", status="completed")
    model = ScriptedModel([[broken, call("c2", "fetch", {"url": "http://x"})], [say("ok")],
                           [say("ok")]])
    run = await Runner.run(Agent(name="a", model=model, tools=[*governed.tools]), "go")
    assert run.final_output == "ok"
    told = outputs(model)
    assert "not valid JSON" in told["c1"]
    assert told["c2"].startswith("Error (tool_raised)") and "cannot reach http://x" in told["c2"]


async def test_a_call_the_invokers_own_handler_approves_runs_once_without_interrupting() -> None:
    DELETED.clear()
    invoker = ToolInvoker([delete_file], AutoApprovalHandler())
    governed = ToolkeeperTools(invoker)
    model = ScriptedModel([[call("c1", "delete_file", {"path": "/keep"})], [say("ok")],
                           [say("ok")]])
    run = await Runner.run(Agent(name="a", model=model, tools=[*governed.tools]), "go")
    assert run.final_output == "ok" and run.interruptions == []
    assert outputs(model)["c1"] == "deleted /keep" and DELETED == ["/keep"]
