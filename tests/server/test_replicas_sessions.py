"""MCP sessions (``--sessions``, the 2025-11-25 wire) carried on by every replica: three
``toolkeeper serve`` replicas on one real PostgreSQL database behind a real HAProxy,
round-robin with no stickiness, and the official MCP client keeping its ``Mcp-Session-Id`` —
each of its requests lands on another replica and none is "Session not found". A session id is
good for the client that opened it only, a session ended on one replica is not found on any, a
forged or altered id is refused like an unknown one, a tool's question answered through
another replica reaches the call that asked, a call cancelled through another replica
stops; a stream broken mid-call resumes through another replica with every event once (or,
its replica killed, ends with an error saying so), and two replicas asking one session's
client at once never send it the same request id."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from ..balancer import REPLICA_HEADER, Balancer, balancer
from ..blocks import text_of
from ..processes import no_traceback
from .test_replicas import TOOLS, _cli, _marks
from .test_serve import CLIENT_TOKENS, _start

Replicas = list[tuple[subprocess.Popen[str], str]]
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "probe", "version": "1"}}}
HEADERS = {"Accept": "application/json, text/event-stream",
           "MCP-Protocol-Version": "2025-11-25"}


GREET = '''
import anyio
from toolkeeper import ToolContext


@tool
async def greet(ctx: ToolContext, n: int) -> str:
    """Ask the person at the client for a name and greet them."""
    answer = await ctx.elicit(f"Your name, {n}?", {
        "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})
    return f"hello {answer['content']['name']} {n}"


@tool
async def crawl(n: int) -> str:
    """Crawl for a minute."""
    with MARKS.open("a") as marks:
        marks.write(f"crawl {n}\\n")
    try:
        await anyio.sleep(60)
    except anyio.get_cancelled_exc_class():
        with MARKS.open("a") as marks:
            marks.write(f"stopped {n}\\n")
        raise
    return f"crawled {n}"


@tool
async def creep(ctx: ToolContext, steps: int) -> str:
    """Creep along, telling each step; from the third on once the test says go."""
    for step in range(1, steps + 1):
        if step == 3:
            with anyio.move_on_after(120):
                while not MARKS.with_name("go").exists():
                    await anyio.sleep(0.05)
        await ctx.report_progress(step, steps)
    return f"crept {steps}"
'''


@pytest.fixture
def balanced(tmp_path: Path, postgres_url: str) -> Iterator[tuple[Balancer, Replicas]]:
    (tmp_path / "tools.py").write_text(TOOLS + GREET)
    started = [_start(tmp_path, "--store", postgres_url, "--sessions", "--rate-limit", "10000",
                      tools=str(tmp_path / "tools.py"), state=f"r{i}") for i in range(3)]
    try:
        with balancer([url for _, url in started], tmp_path) as front:
            CLIENT_TOKENS[front.url] = CLIENT_TOKENS[started[0][1]]  # one agent, 3 replicas
            yield front, started
    finally:
        for proc, _ in started:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)
            no_traceback(proc)


async def test_a_session_client_keeps_its_session_while_each_request_lands_on_another_replica(
        balanced: tuple[Balancer, Replicas]) -> None:
    front, _ = balanced
    seen: list[tuple[str, str | None]] = []

    async def note(response: httpx2.Response) -> None:
        if response.request.method == "POST":  # one after the other (a GET stream runs beside)
            seen.append((response.headers.get(REPLICA_HEADER, "?"),
                         response.headers.get("mcp-session-id")))

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {CLIENT_TOKENS[front.url]}"},
                              timeout=60, event_hooks={"response": [note]})
    async with Client(streamable_http_client(f"{front.url}/mcp", http_client=http),
                      mode="legacy") as client:
        names = [t.name for t in (await client.list_tools()).tools]
        answers = [text_of((await client.call_tool("ping", {"n": n})).content[0])
                   for n in range(6)]
    assert names == ["crawl", "creep", "greet", "launch", "ping"] and answers == [str(n) for n in range(6)]
    replicas = [replica for replica, _ in seen]
    assert set(replicas) == {"r0", "r1", "r2"}, seen
    assert all(a != b for a, b in itertools.pairwise(replicas)), replicas
    sessions = {session for _, session in seen if session is not None}
    assert len(sessions) == 1, seen  # one session, whichever replica answered


def _open(url: str, token: str) -> str:
    opened = httpx.post(f"{url}/mcp", json=INIT, timeout=30,
                        headers={**HEADERS, "Authorization": f"Bearer {token}"})
    assert opened.status_code == 200, opened.text
    return opened.headers["mcp-session-id"]


def _list(url: str, token: str, session: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    return httpx.post(f"{url}/mcp", json=body, timeout=30, headers={
        **HEADERS, "Authorization": f"Bearer {token}", "Mcp-Session-Id": session})


def _until_gone(url: str, token: str, session: str) -> None:
    """Within 10 s (a replica that held the session drops it within half a second)."""
    deadline, answer = time.monotonic() + 10, None
    while time.monotonic() < deadline:
        answer = _list(url, token, session)
        if answer.status_code == 404 and "Session not found" in answer.text:
            return
        time.sleep(0.05)  # polled against the deadline
    pytest.fail(f"session still served on {url}: {answer}")


def test_a_session_is_only_its_clients_ends_for_every_replica_and_a_forged_id_is_not_found(
        balanced: tuple[Balancer, Replicas], tmp_path: Path, postgres_url: str) -> None:
    front, replicas = balanced
    (_, first), (_, second), _ = replicas
    added = subprocess.run([sys.executable, "-m", "toolkeeper.cli", "tokens", "add", "mallory",
                            "--store", postgres_url], capture_output=True, text=True,
                           timeout=60, check=False, cwd=tmp_path)
    assert added.returncode == 0, added.stderr
    token, mallory = CLIENT_TOKENS[front.url], added.stdout.strip()
    session = _open(first, token)
    assert _list(second, token, session).status_code == 200  # opened on one, used on another
    for url in (first, second):  # another client holding the id: as if it did not exist
        stolen = _list(url, mallory, session)
        assert stolen.status_code == 404 and "Session not found" in stolen.text
    ended = httpx.delete(f"{first}/mcp", timeout=30, headers={
        **HEADERS, "Authorization": f"Bearer {token}", "Mcp-Session-Id": session})
    assert ended.status_code == 200, ended.text
    for url in (first, second, front.url):  # ended on one: soon not found on any
        _until_gone(url, token, session)
    session = _open(first, token)
    tampered = session[:-4] + ("AAAA" if not session.endswith("AAAA") else "BBBB")
    for forged in (tampered, "tks1.AAAA", "0123456789abcdef0123456789abcdef"):
        refused = _list(second, token, forged)
        assert refused.status_code == 404 and "Session not found" in refused.text, forged


async def test_a_tools_question_answered_through_another_replica_reaches_the_call_that_asked(
        balanced: tuple[Balancer, Replicas], tmp_path: Path) -> None:
    front, _ = balanced
    posted: list[tuple[str, str]] = []

    async def note(response: httpx2.Response) -> None:
        if response.request.method == "POST":
            body = json.loads(response.request.content or b"{}")
            posted.append((str(body.get("method", "answer")),
                           response.headers.get(REPLICA_HEADER, "?")))

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {CLIENT_TOKENS[front.url]}"},
                              timeout=60, event_hooks={"response": [note]})
    async with Client(streamable_http_client(f"{front.url}/mcp", http_client=http),
                      mode="legacy", elicitation_callback=elicit) as client:
        results = [await client.call_tool("greet", {"n": n}) for n in range(3)]
    assert [text_of(r.content[0]) for r in results] == [f"hello Ada {n}" for n in range(3)], \
        results
    calls = [replica for method, replica in posted if method == "tools/call"]
    answers = [replica for method, replica in posted if method == "answer"]
    assert len(calls) == len(answers) == 3, posted
    assert all(call != answer for call, answer in zip(calls, answers, strict=True)), posted


def _until_marked(tmp_path: Path, mark: str) -> None:
    """Within 20 s (a cancellation is brought from the store within a twentieth of one)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if mark in _marks(tmp_path):
            return
        time.sleep(0.05)  # polled against the deadline
    pytest.fail(f"never marked {mark!r}: {_marks(tmp_path)}")


async def test_a_call_cancelled_through_another_replica_stops_and_is_audited_cancelled_once(
        balanced: tuple[Balancer, Replicas], tmp_path: Path, postgres_url: str) -> None:
    front, _ = balanced
    posted: list[tuple[str, str]] = []

    async def note(response: httpx2.Response) -> None:
        if response.request.method == "POST":
            body = json.loads(response.request.content or b"{}")
            posted.append((str(body.get("method")), response.headers.get(REPLICA_HEADER, "?")))

    async def call(client: Client) -> None:
        await client.call_tool("crawl", {"n": 1})

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {CLIENT_TOKENS[front.url]}"},
                              timeout=60, event_hooks={"response": [note]})
    async with Client(streamable_http_client(f"{front.url}/mcp", http_client=http),
                      mode="legacy") as client:
        async with anyio.create_task_group() as group:
            group.start_soon(call, client)
            await anyio.to_thread.run_sync(_until_marked, tmp_path, "crawl 1")
            group.cancel_scope.cancel()  # the client sends notifications/cancelled
        await anyio.to_thread.run_sync(_until_marked, tmp_path, "stopped 1")
    assert _marks(tmp_path) == ["crawl 1", "stopped 1"]
    calls = [replica for method, replica in posted if method == "tools/call"]
    cancels = [replica for method, replica in posted if method == "notifications/cancelled"]
    assert len(calls) == len(cancels) == 1 and calls != cancels, posted
    audit = _cli(tmp_path, "audit", "--json", "--store", postgres_url)
    rows = [json.loads(line) for line in audit.stdout.splitlines() if line.strip()]
    assert [(r["status"], r.get("error_code")) for r in rows if r["tool"] == "crawl"] == [
        ("error", "cancelled")], rows


def _posted_method(response: httpx2.Response) -> str:
    if response.request.method != "POST":
        return response.request.method
    return str(json.loads(response.request.content or b"{}").get("method", "answer"))


async def test_a_stream_cut_mid_call_resumes_on_another_replica_with_every_event_once(
        balanced: tuple[Balancer, Replicas], tmp_path: Path, postgres_url: str) -> None:
    front, _ = balanced
    seen: list[tuple[str, str, str | None]] = []  # (method, replica, Last-Event-ID)
    steps: list[float] = []
    two = anyio.Event()

    async def note(response: httpx2.Response) -> None:
        seen.append((_posted_method(response), response.headers.get(REPLICA_HEADER, "?"),
                     response.request.headers.get("last-event-id")))

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        steps.append(progress)
        if len(steps) == 2:
            two.set()

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {CLIENT_TOKENS[front.url]}"},
                              timeout=60, event_hooks={"response": [note]})
    results: list[types.CallToolResult] = []
    async with Client(streamable_http_client(f"{front.url}/mcp", http_client=http),
                      mode="legacy") as client:

        async def call() -> None:
            results.append(await client.call_tool("creep", {"steps": 5},
                                                  progress_callback=on_progress))

        try:
            with anyio.fail_after(90):
                async with anyio.create_task_group() as group:
                    group.start_soon(call)
                    await two.wait()
                    runner = next(r for m, r, _ in seen if m == "tools/call")
                    await anyio.to_thread.run_sync(front.cut, runner)  # the stream breaks
                    (tmp_path / "go").touch()  # and the call goes on, on its replica
        except TimeoutError:
            gets = sum(1 for method, _, last in seen if method == "GET" and last)
            pytest.fail(f"the call never finished: progress {steps}, requests {seen[:6]} "
                        f"and {gets} GETs with Last-Event-ID")
    assert [text_of(r.content[0]) for r in results] == ["crept 5"], results
    assert steps == [1, 2, 3, 4, 5], steps
    resumed = [replica for method, replica, last in seen if method == "GET" and last]
    assert resumed and runner not in resumed, seen
    audit = _cli(tmp_path, "audit", "--json", "--store", postgres_url)
    rows = [json.loads(line) for line in audit.stdout.splitlines() if line.strip()]
    assert [r["status"] for r in rows if r["tool"] == "creep"] == ["ok"], rows


async def test_a_stream_whose_replica_is_killed_mid_call_ends_with_an_error_saying_so(
        balanced: tuple[Balancer, Replicas]) -> None:
    front, replicas = balanced
    runners: list[str] = []
    two = anyio.Event()

    async def note(response: httpx2.Response) -> None:
        if _posted_method(response) == "tools/call":
            runners.append(response.headers.get(REPLICA_HEADER, "?"))

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if progress == 2:
            two.set()

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {CLIENT_TOKENS[front.url]}"},
                              timeout=60, event_hooks={"response": [note]})
    async with Client(streamable_http_client(f"{front.url}/mcp", http_client=http),
                      mode="legacy") as client:

        async def kill_the_runner() -> None:
            await two.wait()
            replicas[front.names.index(runners[0])][0].kill()  # SIGKILL: the call is lost

        lost: list[MCPError] = []
        try:
            with anyio.fail_after(90):
                async with anyio.create_task_group() as group:
                    group.start_soon(kill_the_runner)
                    try:
                        await client.call_tool("creep", {"steps": 5},
                                               progress_callback=on_progress)
                    except MCPError as exc:
                        lost.append(exc)
        except TimeoutError:
            pytest.fail(f"the call on {runners} was killed and never answered within 90 s")
    assert len(lost) == 1 and "stopped before the call finished" in str(lost[0]), lost


async def test_two_replicas_asking_one_sessions_client_at_once_get_each_their_own_answer(
        balanced: tuple[Balancer, Replicas]) -> None:
    """Three calls, each on its replica, ask the client at once; then only one replica is
    left in the balancer, and the question of another is answered first: it reaches a
    replica that has a question out too, and must not be taken for that one's answer."""
    front, _ = balanced
    askers: dict[int, str] = {}  # the call's n: the replica running it
    asked: list[int] = []
    answered: list[int] = []
    everyone, turns = anyio.Event(), {n: anyio.Event() for n in range(3)}

    async def note(response: httpx2.Response) -> None:
        body = json.loads(response.request.content or b"{}") \
            if response.request.method == "POST" else {}
        if body.get("method") == "tools/call":
            askers[body["params"]["arguments"]["n"]] = response.headers.get(REPLICA_HEADER, "?")
        elif "result" in body:
            answered.append(int(body["result"]["content"]["name"].removeprefix("Ada")))

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        n = int(str(params.message).removeprefix("Your name, ").removesuffix("?"))
        asked.append(n)
        if len(asked) == 3:
            everyone.set()
        await turns[n].wait()
        return types.ElicitResult(action="accept", content={"name": f"Ada{n}"})

    async def until(what: str, done: Callable[[], bool]) -> None:
        with anyio.move_on_after(30):
            while not done():
                await anyio.sleep(0.02)
        assert done(), f"{what}: asked {asked}, on {askers}, answered {answered}"

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {CLIENT_TOKENS[front.url]}"},
                              timeout=60, event_hooks={"response": [note]})
    answers: dict[int, str] = {}
    async with Client(streamable_http_client(f"{front.url}/mcp", http_client=http),
                      mode="legacy", elicitation_callback=elicit) as client:

        async def greet(n: int) -> None:
            answers[n] = text_of((await client.call_tool("greet", {"n": n})).content[0])

        with anyio.fail_after(120):
            async with anyio.create_task_group() as group:
                for n in range(3):
                    group.start_soon(greet, n)
                await until("every question out at once", everyone.is_set)
                left = askers[0]
                first = next(n for n, replica in askers.items() if replica != left)
                for name in front.names:  # every answer now reaches the replica left
                    if name != left:
                        front.admin(f"disable server replicas/{name}")
                turns[first].set()
                await until("the first answer sent", lambda: bool(answered))
                for event in turns.values():
                    event.set()
    assert answers == {n: f"hello Ada{n} {n}" for n in range(3)}, (answers, askers)
