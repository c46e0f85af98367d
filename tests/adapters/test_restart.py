"""A LangGraph agent program killed (SIGKILL) while a risky call waits for approval; a person
approves it with `toolkeeper approvals approve`; the program started again resumes the graph
from its SQLite checkpointer and the decision in the store, and the call runs once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from toolkeeper.approval import SqliteApprovalStore
from toolkeeper.invoke.audit import SqliteAuditLog

from ..processes import readable

PROGRAM = '''
import asyncio, json, os, sys
from pathlib import Path

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from toolkeeper import ChainPolicy, ToolInvoker, ToolRisk, tool
from toolkeeper.adapters.langchain import ToolkeeperTools
from toolkeeper.approval import PersistedApprovalHandler, SqliteApprovalStore
from toolkeeper.invoke.audit import SqliteAuditLog

STATE = Path(sys.argv[1])


@tool(risk=ToolRisk.HIGH)
def delete_file(path: str) -> str:
    """Delete a file."""
    os.remove(path)
    return f"deleted {path}"


class Model(FakeMessagesListChatModel):
    def bind_tools(self, tools, **kwargs):
        return self


async def main(step: str) -> None:
    db = STATE / "toolkeeper.db"
    invoker = ToolInvoker([delete_file], PersistedApprovalHandler(SqliteApprovalStore(db)),
                          policy=ChainPolicy(approval_ttl_s=3600), audit=SqliteAuditLog(db))
    governed = ToolkeeperTools(invoker, session_id="thread-1")
    model = Model(responses=[
        AIMessage("", tool_calls=[{"name": "delete_file", "id": "c1",
                                   "args": {"path": str(STATE / "old.log")}}]),
        AIMessage("Done.")])
    thread = {"configurable": {"thread_id": "thread-1"}}
    async with AsyncSqliteSaver.from_conn_string(str(STATE / "graph.db")) as saver:
        if step == "start":
            agent = create_agent(model, governed.tools, checkpointer=saver)
            run = await agent.ainvoke({"messages": [{"role": "user", "content": "clean"}]},
                                      thread)
            print(run["__interrupt__"][0].value["approval_id"], flush=True)
            sys.stdin.read()  # waits here until it is killed
        model.i = 1
        agent = create_agent(model, governed.tools, checkpointer=saver)
        waiting = [i for t in (await agent.aget_state(thread)).tasks for i in t.interrupts]
        command = await governed.resume_from_store(waiting)
        done = await agent.ainvoke(command, thread)
        print(json.dumps([str(m.content) for m in done["messages"]]), flush=True)


asyncio.run(main(sys.argv[2]))
'''


def test_a_killed_agent_program_resumes_after_an_approval_from_the_cli(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "old.log").write_text("old")
    program = tmp_path / "agent.py"
    program.write_text(PROGRAM)
    first = subprocess.Popen([sys.executable, str(program), str(state), "start"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert first.stdout is not None
        ready = readable([first.stdout], 120)
        approval_id = first.stdout.readline().strip() if ready else ""
        assert approval_id.startswith("apr_")
        assert (state / "old.log").exists()  # nothing ran while it waits
    finally:
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=30)

    cli = subprocess.run([sys.executable, "-m", "toolkeeper", "approvals", "approve",
                          approval_id, "--state-dir", str(state)],
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stderr

    second = subprocess.run([sys.executable, str(program), str(state), "resume"],
                            capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    messages = json.loads(second.stdout.strip().splitlines()[-1])
    assert messages[-2:] == [f"deleted {state / 'old.log'}", "Done."]
    assert not (state / "old.log").exists()
    stored = SqliteApprovalStore(state / "toolkeeper.db").get(approval_id)
    assert stored is not None and stored.state == "done"
    assert stored.decision is not None and stored.decision.approver == "cli"
    rows = SqliteAuditLog(state / "toolkeeper.db").query(tool="delete_file")
    assert sorted((r.status, r.approver or "") for r in rows) == [("ok", "cli"), ("pending", "")]
