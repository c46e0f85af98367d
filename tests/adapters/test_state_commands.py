"""An agent of each framework over a persisted approval store, built as the docs build it (no
``audit=``): its calls are in the audit log beside the store, and the command its waiting
message names — with the ``--state-dir`` or ``--db`` of that store, never the default one's —
decides the request when a person runs it as printed, the real ``toolkeeper`` command."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agents import Agent as AgentsAgent
from agents import Runner
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from toolkeeper import ChainPolicy, ToolInvoker
from toolkeeper.adapters.openai_agents import ToolkeeperTools
from toolkeeper.adapters.pydantic_ai import ToolkeeperCapability
from toolkeeper.approval import PersistedApprovalHandler, SqliteApprovalStore

from .test_openai_agents import ScriptedModel, call, say
from .world import DELETED, add, delete_file

pytestmark = pytest.mark.anyio


def toolkeeper(command: str, xdg: Path) -> subprocess.CompletedProcess[str]:
    """``command`` as a person would paste it: the real CLI, whose default state dir (under
    ``xdg``) is not the agent's."""
    argv = shlex.split(command)
    assert argv[0] == "toolkeeper", command
    env = {**os.environ, "XDG_STATE_HOME": str(xdg)}
    return subprocess.run([sys.executable, "-m", "toolkeeper.cli", *argv[1:]], env=env,
                          capture_output=True, text=True, timeout=120)


def audited(options: str, xdg: Path) -> list[tuple[str, str]]:
    done = toolkeeper(f"toolkeeper audit {options} --json", xdg)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    return sorted((r["tool"], r["status"]) for r in rows)


def invoker_over(db: Path) -> ToolInvoker:
    """As docs/frameworks.md makes it: an approval store, no audit log named."""
    return ToolInvoker([add, delete_file], PersistedApprovalHandler(SqliteApprovalStore(db)),
                       policy=ChainPolicy(approval_ttl_s=3600))


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if sum(isinstance(m, ModelResponse) for m in messages) == 0:
        return ModelResponse(parts=[ToolCallPart("add", {"a": 1, "b": 2}, tool_call_id="c1"),
                                    ToolCallPart("delete_file", {"path": "/keep"},
                                                 tool_call_id="c2")])
    return ModelResponse(parts=[TextPart("done")])


@pytest.mark.parametrize("name", ["toolkeeper.db", "agent.db"])
async def test_a_pydantic_ai_agent_names_the_command_of_its_own_state_and_audits_beside_it(
        tmp_path: Path, name: str) -> None:
    DELETED.clear()
    db = tmp_path / "agent state" / name  # a space: the command quotes the path
    governed = ToolkeeperCapability(invoker_over(db), session_id="conversation-1")
    agent = Agent(FunctionModel(model), capabilities=[governed],
                  output_type=[str, DeferredToolRequests])
    run = await agent.run("clean up")
    requests = run.output
    assert isinstance(requests, DeferredToolRequests)
    waiting = requests.metadata["c2"]
    options = shlex.join(["--state-dir", str(db.parent)] if name == "toolkeeper.db"
                         else ["--db", str(db)])
    command = f"toolkeeper approvals decide {waiting['approval_id']} approve {options}"
    assert command in waiting["message"]
    assert audited(options, tmp_path / "xdg") == [("add", "ok"), ("delete_file", "pending")]

    decided = toolkeeper(command, tmp_path / "xdg")
    assert decided.returncode == 0, decided.stderr
    resumed = await agent.run(message_history=run.all_messages(),
                              deferred_tool_results=await governed.results_from_store(requests))
    assert resumed.output == "done" and DELETED == ["/keep"]
    assert audited(options, tmp_path / "xdg") == [
        ("add", "ok"), ("delete_file", "ok"), ("delete_file", "pending")]


async def test_an_openai_agents_run_is_audited_beside_its_store_and_resumes_from_the_cli(
        tmp_path: Path) -> None:
    DELETED.clear()
    state = tmp_path / "agent-state"
    governed = ToolkeeperTools(invoker_over(state / "toolkeeper.db"), session_id="c-1")
    scripted = ScriptedModel([[call("c1", "add", {"a": 1, "b": 2}),
                               call("c2", "delete_file", {"path": "/keep"})],
                              [say("done")], [say("done")]])
    agent = AgentsAgent(name="ops", model=scripted, tools=[*governed.tools], hooks=governed.hooks)
    run = await Runner.run(agent, "clean up")
    assert [getattr(i.raw_item, "name", None) for i in run.interruptions] == ["delete_file"]
    options = f"--state-dir {state}"
    assert audited(options, tmp_path / "xdg") == [("add", "ok"), ("delete_file", "pending")]

    listed = toolkeeper(f"toolkeeper approvals list {options} --json", tmp_path / "xdg")
    [request] = json.loads(listed.stdout)["approvals"]
    decided = toolkeeper(f"toolkeeper approvals approve {request['id']} {options}",
                         tmp_path / "xdg")
    assert decided.returncode == 0, decided.stderr
    state_of_run: Any = run.to_state()
    assert await governed.apply_store_decisions(state_of_run) == 1
    resumed = await Runner.run(agent, state_of_run)
    assert resumed.final_output == "done" and DELETED == ["/keep"]
    assert audited(options, tmp_path / "xdg") == [
        ("add", "ok"), ("delete_file", "ok"), ("delete_file", "pending")]
