"""``toolkeeper serve`` as a real process on loopback, with the official MCP client over
Streamable HTTP: tokens, DNS-rebinding protection, calls through the invoker, approvals stored."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from ..blocks import text_of
from ..processes import no_traceback, readable

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "weather.py")
TOKEN = "test-operator-token-0123456789"


def _start(tmp_path: Path, *args: str, token: str | None = TOKEN, tools: str = EXAMPLE,
           state: str = "state") -> tuple[subprocess.Popen[str], str]:
    """A ``toolkeeper serve`` process with ``tools`` (and no built-ins) on a free port: (the
    process, its URL). Later ``args`` win over the defaults (``--approval-wait 0``)."""
    env = {k: v for k, v in os.environ.items() if k != "TOOLKEEPER_TOKEN"}
    if token is not None:
        env["TOOLKEEPER_TOKEN"] = token
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkeeper.cli", "serve", tools, "--no-builtins", "--port", "0",
         "--state-dir", str(tmp_path / state), "--approval-wait", "0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    return proc, _started(proc, tmp_path / state)


def _started(proc: subprocess.Popen[str], state_dir: Path) -> str:
    """The URL a starting ``toolkeeper serve`` prints (within 60 s, else the test fails);
    its client token is remembered in ``CLIENT_TOKENS``."""
    assert proc.stdout is not None
    ready = readable([proc.stdout], 60)
    line = proc.stdout.readline() if ready else ""
    if not line.startswith("toolkeeper serving on "):
        proc.kill()
        pytest.fail(f"serve did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}")
    url = line.split()[3]
    _remember(url, state_dir)
    return url


CLIENT_TOKENS: dict[str, str] = {}
"""Each started server's default client token (the one its printed config carries)."""


def _remember(url: str, state_dir: Path) -> None:
    token = state_dir / "client-token"
    if token.exists():
        CLIENT_TOKENS[url] = token.read_text().strip()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    proc, url = _start(tmp_path)
    yield url
    proc.send_signal(signal.SIGINT)  # Ctrl-C: a clean stop (130 is the shell's code for it)
    assert proc.wait(timeout=20) in (0, 130)
    no_traceback(proc)


def _client(url: str, token: str | None = None) -> Client:
    """The official MCP client with ``token`` (by default the server's default client's)."""
    token = token or CLIENT_TOKENS[url]
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http))


async def test_an_mcp_client_lists_and_calls_through_the_governed_door(
        server: str, tmp_path: Path) -> None:
    async with _client(server) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        forecast = await client.call_tool("get_forecast", {"city": "Lisbon"})
        invalid = await client.call_tool("get_forecast", {"days": 2})
        alert = await client.call_tool("broadcast_alert", {"alert": {
            "region": "PT-11", "level": "red", "message": "Storm"}})
    assert names == ["broadcast_alert", "get_forecast"]
    assert not forecast.is_error and forecast.structured_content["city"] == "Lisbon"
    assert invalid.is_error and "missing required argument 'city'" in text_of(invalid.content[0])
    assert alert.is_error and "waiting for approval" in text_of(alert.content[0])
    with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
        (state,) = db.execute("SELECT state FROM approvals WHERE tool = 'broadcast_alert'").fetchone()
        audited = [r[0] for r in db.execute("SELECT tool FROM audit ORDER BY rowid")]
        call_ids = [r[0] for r in db.execute("SELECT call_id FROM audit")]
    assert state == "pending"  # stored: it survives a restart, to be decided and resumed
    assert audited == ["get_forecast", "get_forecast", "broadcast_alert"]
    assert len(set(call_ids)) == 3 and all(c.startswith("mcp_") for c in call_ids)


@pytest.mark.parametrize(("headers", "status"), [
    ({}, 401),
    ({"Authorization": "Bearer wrong-token"}, 401),
    ({"Authorization": "Bearer CLIENT", "Host": "evil.example"}, 421),
    ({"Authorization": "Bearer CLIENT", "Origin": "http://evil.example"}, 403),
])
def test_missing_or_wrong_tokens_and_foreign_hosts_or_origins_are_refused(
        server: str, headers: dict[str, str], status: int) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {k: v.replace("CLIENT", CLIENT_TOKENS[server]) for k, v in headers.items()}
    response = httpx.post(f"{server}/mcp", json=body, timeout=10, headers={
        "Accept": "application/json, text/event-stream", **headers})
    assert response.status_code in ({status, 400} if status == 421 else {status})
    assert "get_forecast" not in response.text
    assert httpx.get(f"{server}/healthz", timeout=10).json()["status"] == "ok"


def test_the_printed_config_carries_a_client_token_never_the_operators(
        tmp_path: Path) -> None:
    proc, url = _start(tmp_path, token=None)
    try:
        assert proc.stdout is not None
        assert "/login?code=" in proc.stdout.readline()  # the page's one-time link
        snippet = proc.stdout.readline()
        state = tmp_path / "state"
        operator = (state / "token").read_text().strip()
        client = (state / "client-token").read_text().strip()
        assert len(operator) >= 40 and operator not in snippet + proc.stdout.readline()
        assert client.startswith("tkc_") and f"Bearer {client}" in snippet
        for name in ("token", "client-token", "toolkeeper.db"):
            assert (state / name).stat().st_mode & 0o777 == 0o600, name
        assert state.stat().st_mode & 0o777 == 0o700
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        accept = {"Accept": "application/json, text/event-stream"}
        listed = httpx.post(f"{url}/mcp", json=body, timeout=10,
                            headers={**accept, "Authorization": f"Bearer {client}"})
        assert listed.status_code == 200 and "get_forecast" in listed.text
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    again, _ = _start(tmp_path, token=None)
    try:
        assert again.stdout is not None
        again.stdout.readline()
        assert f"Bearer {client}" in again.stdout.readline()  # the same client, every start
    finally:
        again.send_signal(signal.SIGINT)
        again.wait(timeout=20)


def test_auth_none_is_refused_beyond_loopback(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "toolkeeper.cli", "serve", "--no-builtins", "--auth", "none",
         "--host", "0.0.0.0", "--state-dir", str(tmp_path / "s")],
        capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert "--auth none is refused on 0.0.0.0" in result.stderr


def _tokens(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "toolkeeper.cli", "tokens", *args,
                           "--state-dir", str(tmp_path / "state")],
                          capture_output=True, text=True, timeout=60, check=False)


async def test_each_client_has_its_own_token_and_its_calls_carry_its_name(
        tmp_path: Path) -> None:
    added = _tokens(tmp_path, "add", "alice")
    assert added.returncode == 0, added.stderr
    alice = added.stdout.strip()
    assert alice.startswith("tkc_") and len(alice) > 40
    assert _tokens(tmp_path, "add", "alice").returncode == 2  # one token per client
    proc, url = _start(tmp_path)
    try:
        async with _client(url, token=alice) as client:
            result = await client.call_tool("get_forecast", {"city": "Porto"})
        assert not result.is_error
        async with _client(url) as client:  # the default client of the printed config
            await client.call_tool("get_forecast", {"city": "Faro"})
        with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
            rows = db.execute("SELECT session_id FROM audit ORDER BY rowid").fetchall()
        assert [r[0] for r in rows] == ["client-alice", "client-default"]
        listed = _tokens(tmp_path, "list")
        assert "alice" in listed.stdout and alice not in listed.stdout
        assert _tokens(tmp_path, "revoke", "alice").returncode == 0
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        refused = httpx.post(f"{url}/mcp", json=body, timeout=10, headers={
            "Authorization": f"Bearer {alice}", "Accept": "application/json, text/event-stream"})
        assert refused.status_code == 401
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)


async def test_a_config_decides_the_built_ins_autonomy_and_skills(tmp_path: Path) -> None:
    skills = tmp_path / "skills" / "triage"
    skills.mkdir(parents=True)
    (skills / "SKILL.md").write_text("---\nname: triage\ndescription: Sort the inbox.\n---\n"
                                     "Label every message, then archive the noise.\n")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "notes.txt").write_text("hello\n")
    config = tmp_path / "toolkeeper.toml"
    config.write_text(f'[security]\nworkspace = "ws"\nautonomy = "read_only"\n'
                      f'[skills]\ndir = "{tmp_path / "skills"}"\n')
    proc, url = _start(tmp_path, "--config", str(config))
    proc_args = proc.args
    assert isinstance(proc_args, list)
    assert "--no-builtins" in proc_args  # _start always passes it: restart without it
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=20)
    env = {**os.environ, "TOOLKEEPER_TOKEN": TOKEN}
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkeeper.cli", "serve", "--port", "0", "--config", str(config),
         "--state-dir", str(tmp_path / "state")], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        assert proc.stdout is not None
        ready = readable([proc.stdout], 60)
        url = (proc.stdout.readline() if ready else "").split()[3]
        _remember(url, tmp_path / "state")
        async with _client(url) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            read = await client.call_tool("file_read", {"path": "notes.txt"})
            prompts = [p.name for p in (await client.list_prompts()).prompts]
        assert "file_read" in names and not names & {"shell", "file_write", "file_edit"}
        assert not read.is_error and "hello" in text_of(read.content[0])
        assert prompts == ["triage"]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)


def test_each_client_is_rate_limited_on_its_own(tmp_path: Path) -> None:
    bob = _tokens(tmp_path, "add", "bob").stdout.strip()
    proc, url = _start(tmp_path, "--rate-limit", "2")
    try:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}

        def post(token: str) -> httpx.Response:
            return httpx.post(f"{url}/mcp", json=body, timeout=10, headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/json, text/event-stream"})

        responses = [post(CLIENT_TOKENS[url]) for _ in range(12)]
        statuses = [r.status_code for r in responses]
        assert 429 in statuses and statuses[0] != 429
        limited = next(r for r in responses if r.status_code == 429)
        assert limited.headers["retry-after"] == "1"
        assert post(bob).status_code != 429  # another client has its own bucket
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)


def test_without_a_credential_one_connection_flooding_is_limited_and_another_is_not(
        tmp_path: Path) -> None:
    """``--auth none``: every local caller is the client ``anonymous``; the limit counts each
    connection apart, so one caller flooding does not refuse the others (the official
    conformance suite, run against a default serve, was refused 429 as one client)."""
    proc, url = _start(tmp_path, "--auth", "none", "--rate-limit", "0.1")  # one, then 10 s
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    try:
        with httpx.Client(timeout=10, headers=accept) as flooder, \
                httpx.Client(timeout=10, headers=accept) as other:  # a connection each
            flooded = [flooder.post(f"{url}/mcp", json=body) for _ in range(5)]
            answered = other.post(f"{url}/mcp", json=body)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    assert [r.status_code for r in flooded] == [200, 429, 429, 429, 429]
    assert answered.status_code == 200 and "get_forecast" in answered.text
    refusal = flooded[1].json()
    assert refusal["error"] == "rate_limited" and flooded[1].headers["retry-after"] == "1"
    said = refusal["message"]  # which limit, whose, and how to raise it
    assert "more than 0.1 requests per second (bursts of 1)" in said and "on connection" in said
    assert "toolkeeper serve --rate-limit N (0 turns it off)" in said


async def test_a_call_waits_for_a_decision_made_from_another_terminal_and_runs_once(
        tmp_path: Path) -> None:
    import re

    import anyio

    proc, url = _start(tmp_path, "--approval-wait", "20")
    alert = {"alert": {"region": "PT-11", "level": "red", "message": "Storm"}}
    decided: list[str] = []

    async def decide_when_it_shows() -> None:
        with anyio.fail_after(20):
            while not decided:
                listed = await anyio.to_thread.run_sync(lambda: _approvals(tmp_path, "list"))
                found = re.findall(r"apr_[\w-]+", listed.stdout)
                if found:
                    assert "PT-11" in listed.stdout  # the exact arguments are shown
                    done = await anyio.to_thread.run_sync(
                        _approvals, tmp_path, "decide", found[0], "approve")
                    assert done.returncode == 0, done.stderr
                    decided.append(found[0])
                await anyio.sleep(0.2)

    try:
        async with _client(url) as client, anyio.create_task_group() as group:
            group.start_soon(decide_when_it_shows)
            result = await client.call_tool("broadcast_alert", alert)
        assert not result.is_error and "PT-11" in text_of(result.content[0])
        again = _approvals(tmp_path, "decide", decided[0], "deny")
        assert again.returncode == 2 and "already decided" in again.stderr
        with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
            (state,) = db.execute("SELECT state FROM approvals").fetchone()
        assert state == "done"  # taken by this call: a resume cannot run it again
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)


def _approvals(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "toolkeeper.cli", "approvals", *args,
                           "--state-dir", str(tmp_path / "state")],
                          capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "COLUMNS": "300"})
