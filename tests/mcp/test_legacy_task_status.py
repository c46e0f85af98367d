"""A 2025-11-25 task on a connection that stays open (``serve --sessions``, ``serve --stdio``),
with the official MCP Python client in legacy mode: the client is told each change of its
task's status (``notifications/tasks/status``), and a tool that asks the client something
inside a task puts the task in ``input_required`` while its question reaches the client
through ``tasks/result`` (marked with the task it belongs to). The client has no tasks API for
that revision, so its task requests are sent as the SDK sends any request of its own; and it
checks a 2025-11-25 ``tools/call`` result against ``CallToolResult`` alone, so that check lets
a task-augmented call's answer (the task) through, as a client with tasks reads it."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.extension import ClientExtension, NotificationBinding
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import methods
from pydantic import ConfigDict

from ..server.test_serve import CLIENT_TOKENS, TOKEN, _start
from .test_tasks import TOOLS as RENDER
from .test_tasks import _stop

pytestmark = pytest.mark.anyio

RELATED = "io.modelcontextprotocol/related-task"
TOOLS = RENDER + '''
from toolkeeper import ToolContext

NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@tool(task_support="optional")
async def greet(ctx: ToolContext) -> str:
    """Ask the user's name, then greet them."""
    answer = await ctx.elicit("Your name?", NAME, key="name")
    return f"hello {answer['content']['name']}"


@tool(task_support="optional")
async def muse(ctx: ToolContext) -> str:
    """Ask the client's model for a word."""
    return "mused " + await ctx.sample("One word, please.", max_tokens=5)
'''


@pytest.fixture(autouse=True)
def takes_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The client's result check, which knows no task for a 2025-11-25 ``tools/call``."""
    checked = methods.validate_server_result

    def check(method: str, version: str, data: Any, **named: Any) -> None:
        if not (method == "tools/call" and "task" in data):
            checked(method, version, data, **named)

    monkeypatch.setattr(methods, "validate_server_result", check)


class CallParams(types.RequestParams):
    name: str
    arguments: dict[str, Any]
    task: dict[str, Any]


class TaskCall(types.Request[CallParams, Literal["tools/call"]]):
    """``tools/call`` with ``params.task``: run it as a task."""

    method: Literal["tools/call"] = "tools/call"
    params: CallParams


class TaskId(types.RequestParams):
    task_id: str


class TaskResult(types.Request[TaskId, Literal["tasks/result"]]):
    method: Literal["tasks/result"] = "tasks/result"
    params: TaskId


class TaskCancel(types.Request[TaskId, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskId


class Answer(types.Result):
    model_config = ConfigDict(extra="allow")


class Heard(ClientExtension):
    """What the client was told (each task status notification's params) and asked. The
    SDK's client delivers a notification its 2025-11-25 tables do not name only to an
    extension that binds it: this one does (and advertises only its own name)."""

    identifier = "dev.toolkeeper.test/task-status"

    def __init__(self) -> None:
        self.statuses: list[dict[str, Any]] = []
        self.asked: list[Any] = []

    def notifications(self) -> list[NotificationBinding[Any]]:
        return [NotificationBinding(method="notifications/tasks/status",
                                    params_type=types.TaskStatusNotificationParams,
                                    handler=self.told)]

    async def told(self, params: types.TaskStatusNotificationParams) -> None:
        self.statuses.append(params.model_dump(by_alias=True, exclude_none=True))

    def of(self, task_id: str) -> list[str]:
        return [s["status"] for s in self.statuses if s["taskId"] == task_id]

    async def until(self, task_id: str, status: str) -> list[str]:
        """The statuses told for ``task_id`` once ``status`` is among them (within 30 s)."""
        end = time.monotonic() + 30
        while status not in self.of(task_id) and time.monotonic() < end:
            await anyio.sleep(0.05)
        assert status in self.of(task_id), f"never told {status!r}: {self.statuses}"
        return self.of(task_id)


async def _elicit(heard: Heard, _context: Any, params: Any) -> types.ElicitResult:
    heard.asked.append(params)
    return types.ElicitResult(action="accept", content={"name": "Ada"})


async def _sample(heard: Heard, _context: Any, params: Any) -> types.CreateMessageResult:
    heard.asked.append(params)
    return types.CreateMessageResult(role="assistant", model="m",
                                     content=types.TextContent(text="tide"))


def _client(transport: Any, heard: Heard) -> Client:
    """The official client in legacy mode, answering what it is asked into ``heard``."""
    return Client(transport, mode="legacy", extensions=[heard],
                  elicitation_callback=lambda c, p: _elicit(heard, c, p),
                  sampling_callback=lambda c, p: _sample(heard, c, p))


def _http(url: str, heard: Heard) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {CLIENT_TOKENS[url]}"},
                              timeout=60)
    return _client(streamable_http_client(f"{url}/mcp", http_client=http), heard)


@asynccontextmanager
async def _session(how: str, tmp_path: Path, heard: Heard) -> AsyncIterator[Client]:
    """The client on ``serve --sessions`` or ``serve --stdio``."""
    (tmp_path / "tools.py").write_text(TOOLS)
    tools = str(tmp_path / "tools.py")
    if how == "stdio":
        launch = StdioServerParameters(command=sys.executable, args=[
            "-m", "toolkeeper.cli", "serve", "--stdio", tools, "--no-builtins",
            "--state-dir", str(tmp_path / "state")],
            env={**os.environ, "TOOLKEEPER_TOKEN": TOKEN}, cwd=str(tmp_path))
        with (tmp_path / "server.log").open("w") as errlog:
            async with _client(stdio_client(launch, errlog=errlog), heard) as session:
                yield session
        assert "Traceback" not in (tmp_path / "server.log").read_text()
        return
    proc, url = _start(tmp_path, "--sessions", tools=tools)
    try:
        async with _http(url, heard) as session:
            yield session
    finally:
        _stop(proc)


async def _task(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    created = await client.session.send_request(TaskCall(params=CallParams(
        name=tool, arguments=arguments, task={"ttl": 60_000})), Answer)
    task = (created.model_extra or {})["task"]
    assert task["status"] == "working", task
    return str(task["taskId"])


async def _result(client: Client, task_id: str) -> dict[str, Any]:
    found = await client.session.send_request(TaskResult(params=TaskId(task_id=task_id)), Answer)
    return found.model_dump(by_alias=True, exclude_none=True)


@pytest.mark.parametrize("how", ["sessions", "stdio"])
async def test_the_client_is_told_when_its_task_ends(how: str, tmp_path: Path) -> None:
    heard = Heard()
    async with _session(how, tmp_path, heard) as client:
        done = await _task(client, "render", {"frames": 1})
        assert await heard.until(done, "completed") == ["completed"]
        result = await _result(client, done)
        slow = await _task(client, "render", {"frames": 2, "seconds": 60})
        await client.session.send_request(TaskCancel(params=TaskId(task_id=slow)), Answer)
        assert await heard.until(slow, "cancelled") == ["cancelled"]
    assert result["content"][0]["text"] == "rendered 1 frames"
    told = next(s for s in heard.statuses if s["taskId"] == done)
    assert told["ttl"] == 60_000 and told["pollInterval"] and told["lastUpdatedAt"]


@pytest.mark.parametrize("how", ["sessions", "stdio"])
async def test_a_task_that_asks_its_client_waits_in_input_required_and_asks_through_tasks_result(
        how: str, tmp_path: Path) -> None:
    heard = Heard()
    async with _session(how, tmp_path, heard) as client:
        greeting = await _task(client, "greet", {})
        await heard.until(greeting, "input_required")
        assert heard.asked == []  # asked on the stream of tasks/result, not before
        greeted = await _result(client, greeting)
        told = await heard.until(greeting, "completed")
        musing = await _task(client, "muse", {})
        await heard.until(musing, "input_required")
        mused = await _result(client, musing)
    assert greeted["content"][0]["text"] == "hello Ada", greeted
    assert greeted["_meta"][RELATED] == {"taskId": greeting}
    assert _in_order(told)
    assert mused["content"][0]["text"] == "mused tide", mused
    (form, prompt) = heard.asked
    assert isinstance(form, types.ElicitRequestFormParams) and form.message == "Your name?"
    assert _meta(form)[RELATED] == {"taskId": greeting}
    assert _meta(prompt)[RELATED] == {"taskId": musing}


def _meta(asked: Any) -> dict[str, Any]:
    found: dict[str, Any] = asked.model_dump(by_alias=True)["_meta"]
    return found


@pytest.fixture
def replicas(tmp_path: Path, postgres_url: str) -> Iterator[list[str]]:
    """Two ``serve --sessions`` processes on one PostgreSQL store; one client token."""
    (tmp_path / "tools.py").write_text(TOOLS)
    started = [_start(tmp_path, "--sessions", "--store", postgres_url,
                      tools=str(tmp_path / "tools.py"), state=f"r{i}") for i in range(2)]
    CLIENT_TOKENS[started[1][1]] = CLIENT_TOKENS[started[0][1]]
    yield [url for _, url in started]
    for proc, _ in started:
        _stop(proc)


async def test_a_question_of_a_task_run_on_one_replica_is_asked_through_tasks_result_on_another(
        replicas: list[str]) -> None:
    """The task runs on replica a, where it was made (and where its client is told of its
    changes); the client's ``tasks/result`` on replica b asks its question, and a's run goes
    on with the answer."""
    on_a, on_b = Heard(), Heard()
    async with _http(replicas[0], on_a) as a, _http(replicas[1], on_b) as b:
        greeting = await _task(a, "greet", {})
        await on_a.until(greeting, "input_required")
        greeted = await _result(b, greeting)
        told = await on_a.until(greeting, "completed")
    assert greeted["content"][0]["text"] == "hello Ada", greeted
    assert _in_order(told)
    assert on_a.asked == [] and len(on_b.asked) == 1  # asked where tasks/result was sent
    assert _meta(on_b.asked[0])[RELATED] == {"taskId": greeting}


def _in_order(told: list[str]) -> bool:
    """The statuses of a task that asked once, as its client was told them: a status held
    only briefly (``working`` again, between the answer and the end) may be over by the time
    it is read, and is then told with the next."""
    return told in (["input_required", "working", "completed"], ["input_required", "completed"])
