"""Three agent frameworks' own MCP clients — nobody here wrote them — against the real
``toolkeeper serve``, each with the client token serve made: pydantic-ai's ``MCPToolset`` driving
an ``Agent`` (its ``FunctionModel`` in place of a paid model), the OpenAI Agents SDK's
``MCPServerStreamableHttp`` and langchain-mcp-adapters' ``MultiServerMCPClient``. Each sees the
tools with their parameter schemas and gets a safe call's value; a high-risk call waits until
the operator approves it over the JSON API and comes back with the result once (the tool ran
once, the audit log shows one run); a denied call reaches the framework as the error its user
sees, naming the denial; and the client's own token cannot approve its call.

langchain-mcp-adapters needs the 1.x MCP SDK where serve has the 2.x one, so it runs as its
users run it, in an environment of its own (``make conformance`` makes it) and a process of its
own."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import httpx
import pytest
from agents.mcp import MCPServerStreamableHttp
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from ..blocks import text_of
from ..processes import no_traceback, readable
from .test_serve import CLIENT_TOKENS, ROOT, TOKEN, _start

T = TypeVar("T")

TOOLS = '''
from pathlib import Path

from toolkeeper import ToolRisk, tool

LEDGER = Path(__file__).with_name("ledger")


@tool
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@tool(risk=ToolRisk.HIGH)
def deploy(version: str) -> str:
    """Deploy a version (a person approves it first)."""
    with LEDGER.open("a") as out:
        out.write(f"deploy {version}\\n")
    return f"deployed {version}"
'''

SCHEMAS = {
    "add": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"]},
    "deploy": {"type": "object", "properties": {"version": {"type": "string"}},
               "required": ["version"]},
}
DENIED = "the call to 'deploy' was not approved (not today)"
WAIT_S = 60.0  # for a request to show up or a line to come: bounds, not expected durations


class Served:
    """A running ``toolkeeper serve``: its URL, its default client's token, its folder."""

    def __init__(self, url: str, folder: Path) -> None:
        self.url, self.mcp, self.folder = url, f"{url}/mcp", folder
        self.client_token = CLIENT_TOKENS[url]

    def ledger(self) -> list[str]:
        path = self.folder / "ledger"
        return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    (tmp_path / "tools.py").write_text(TOOLS)
    proc, url = _start(tmp_path, "--approval-wait", "50", tools=str(tmp_path / "tools.py"))
    try:
        yield Served(url, tmp_path)
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) in (0, 130)
    no_traceback(proc)


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _pending(url: str, ended: Callable[[], bool]) -> str:
    """The id of the one request waiting for a person, once it is there; fails if the call
    ended first or none came within ``WAIT_S``."""
    with anyio.move_on_after(WAIT_S):
        async with httpx.AsyncClient(headers=_bearer(TOKEN), timeout=30) as api:
            while True:
                listed = (await api.get(f"{url}/api/approvals?state=pending")).json()
                if listed["approvals"]:
                    assert len(listed["approvals"]) == 1, listed
                    return str(listed["approvals"][0]["id"])
                if ended():
                    pytest.fail("the call ended before a request for a person was made")
                await anyio.sleep(0.1)
    pytest.fail(f"no request for a person within {WAIT_S} s")


async def _client_cannot_decide(url: str, request: str, client_token: str) -> None:
    """The framework's own token is refused the decision, and the request stays pending."""
    async with httpx.AsyncClient(timeout=30) as api:
        refused = await api.post(f"{url}/api/approvals/{request}/decision",
                                 headers=_bearer(client_token), json={"decision": "approve"})
        after = await api.get(f"{url}/api/approvals/{request}", headers=_bearer(TOKEN))
    assert refused.status_code == 403, refused.text
    assert after.json()["state"] == "pending", after.text


async def _decided(served: Served, call: Callable[[], Awaitable[T]], decision: str) -> T:
    """What ``call`` returns once the operator made ``decision`` on the request it made; before
    a denial, the client's token tries to approve it and is refused."""
    results: list[T] = []
    finished = anyio.Event()

    async def run() -> None:
        results.append(await call())
        finished.set()

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        request = await _pending(served.url, finished.is_set)
        if decision == "deny":
            await _client_cannot_decide(served.url, request, served.client_token)
        async with httpx.AsyncClient(headers=_bearer(TOKEN), timeout=30) as api:
            made = await api.post(f"{served.url}/api/approvals/{request}/decision",
                                  json={"decision": decision, "message": "not today"})
        assert made.status_code == 200, made.text
        with anyio.fail_after(WAIT_S):  # a bound: the decided call answers right away
            await finished.wait()
    return results[0]


def _audited(served: Served) -> list[tuple[object, ...]]:
    """``deploy``'s rows in the audit log, oldest first: (version, status, decision)."""
    entries = httpx.get(f"{served.url}/api/audit?tool=deploy", headers=_bearer(TOKEN),
                        timeout=30).json()["entries"]
    return [(e["arguments"]["version"], e["status"], e["decision"]) for e in reversed(entries)]


def _ran_once_then_denied(served: Served) -> None:
    assert served.ledger() == ["deploy v1"]  # v2 never ran
    assert _audited(served) == [("v1", "ok", "approved"), ("v2", "denied", "denied")]


# pydantic-ai: an Agent whose model calls the tool its prompt names and says what came back


def _model(seen: list[dict[str, Any]]) -> FunctionModel:
    """A model that calls the tool its prompt names (``{"tool", "args"}`` as JSON) and then
    says what the call answered and how it ended (the return's ``outcome``: ``success``, or
    ``retried`` for an error result handed back to the model); each time it notes the tools the
    agent showed it."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append({t.name: t.parameters_json_schema for t in info.function_tools})
        for part in messages[-1].parts:
            if isinstance(part, ToolReturnPart):
                return ModelResponse(parts=[TextPart(f"{part.outcome}: {part.content}")])
        prompt = messages[-1].parts[-1]
        assert isinstance(prompt, UserPromptPart), messages
        asked = json.loads(str(prompt.content))
        return ModelResponse(parts=[ToolCallPart(asked["tool"], asked["args"])])

    return FunctionModel(respond)


async def test_a_pydantic_ai_agent_with_the_mcp_toolset(served: Served) -> None:
    seen: list[dict[str, Any]] = []
    toolset = MCPToolset(served.mcp, headers=_bearer(served.client_token))
    agent = Agent(_model(seen), toolsets=[toolset])

    async def run(tool: str, **args: object) -> str:
        return (await agent.run(json.dumps({"tool": tool, "args": args}))).output

    async with agent:
        added = await run("add", a=2, b=3)
        approved = await _decided(served, lambda: run("deploy", version="v1"), "approve")
        denied = await _decided(served, lambda: run("deploy", version="v2"), "deny")
    assert {name: schema["properties"] for name, schema in seen[0].items()} == {
        name: schema["properties"] for name, schema in SCHEMAS.items()}
    assert added == "success: 5"
    assert approved == "success: deployed v1"
    assert denied.startswith("retried: ") and DENIED in denied  # the model is told, and why
    _ran_once_then_denied(served)


# The OpenAI Agents SDK: the MCP server object an Agent takes, called as the Agent calls it


async def test_the_openai_agents_sdk_mcp_server(served: Served) -> None:
    server = MCPServerStreamableHttp(
        {"url": served.mcp, "headers": _bearer(served.client_token)},
        client_session_timeout_seconds=WAIT_S)  # its 5 s default gives up before a person
    async with server:
        tools = await server.list_tools()
        added = await server.call_tool("add", {"a": 2, "b": 3})
        approved = await _decided(
            served, lambda: server.call_tool("deploy", {"version": "v1"}), "approve")
        denied = await _decided(
            served, lambda: server.call_tool("deploy", {"version": "v2"}), "deny")
    assert {t.name: t.input_schema["properties"] for t in tools} == {
        name: schema["properties"] for name, schema in SCHEMAS.items()}
    assert not added.is_error and text_of(added.content[0]) == "5"
    assert not approved.is_error and [text_of(b) for b in approved.content] == ["deployed v1"]
    assert denied.is_error and DENIED in text_of(denied.content[0])
    _ran_once_then_denied(served)


# langchain-mcp-adapters, in its own environment: a script its user could have written

LANGCHAIN = ROOT / ".conformance" / "langchain" / "bin" / "python"

LANGCHAIN_SCRIPT = '''
import asyncio, json, sys

from langchain_mcp_adapters.client import MultiServerMCPClient


async def main(url, token, calls):
    client = MultiServerMCPClient({"toolkeeper": {
        "transport": "streamable_http", "url": url, "timeout": 60,
        "headers": {"Authorization": f"Bearer {token}"}}})
    tools = {tool.name: tool for tool in await client.get_tools()}
    print(json.dumps({name: tool.args_schema for name, tool in tools.items()}), flush=True)
    for n, (name, args) in enumerate(json.loads(calls)):
        # as an agent calls a tool: with a tool call, answered with a ToolMessage
        message = await tools[name].ainvoke(
            {"type": "tool_call", "id": f"call_{n}", "name": name, "args": args})
        texts = [block["text"] for block in message.content if block["type"] == "text"]
        print(json.dumps({"status": message.status, "texts": texts}), flush=True)


asyncio.run(main(*sys.argv[1:]))
'''


def _line(proc: subprocess.Popen[str]) -> Any:
    """The next JSON line the script prints (within ``WAIT_S``, else the test fails)."""
    assert proc.stdout is not None
    if not readable([proc.stdout], WAIT_S):
        pytest.fail(f"langchain-mcp-adapters said nothing within {WAIT_S} s")
    line = proc.stdout.readline()
    if not line:
        assert proc.stderr is not None
        pytest.fail(f"langchain-mcp-adapters ended: {proc.stderr.read()[-3000:]}")
    return json.loads(line)


@pytest.fixture
def langchain(served: Served) -> Iterator[subprocess.Popen[str]]:
    if not LANGCHAIN.exists():
        pytest.skip("langchain-mcp-adapters' environment is missing: run `make conformance`")
    (served.folder / "agent.py").write_text(LANGCHAIN_SCRIPT)
    calls = [["add", {"a": 2, "b": 3}], ["deploy", {"version": "v1"}],
             ["deploy", {"version": "v2"}]]
    proc = subprocess.Popen(
        [str(LANGCHAIN), "agent.py", served.mcp, served.client_token, json.dumps(calls)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=served.folder)
    try:
        yield proc
    finally:
        proc.kill()
        proc.communicate(timeout=30)


async def test_langchain_mcp_adapters_tools(
        served: Served, langchain: subprocess.Popen[str]) -> None:
    async def line() -> Any:
        return await anyio.to_thread.run_sync(_line, langchain)

    schemas, added = await line(), await line()
    approved = await _decided(served, line, "approve")
    denied = await _decided(served, line, "deny")
    assert {name: schema["properties"] for name, schema in schemas.items()} == {
        name: schema["properties"] for name, schema in SCHEMAS.items()}
    assert added == {"status": "success", "texts": ["5"]}
    assert approved == {"status": "success", "texts": ["deployed v1"]}
    # an MCP error result becomes a ToolMessage with status "error": the model reads why
    assert denied["status"] == "error" and DENIED in denied["texts"][0]
    _ran_once_then_denied(served)
