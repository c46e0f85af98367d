"""Policies decide more than tool calls, through a real ``toolkeeper serve`` and the official MCP
client: a resource read and a prompt get — the server's own and the gateway's relayed ones — are
served when allowed and refused with the policy's id and reason when forbidden (a subscription
and a prompt's completions too), and listed only when allowed, over HTTP and over stdio; ``@ask`` on a read
is refused when the policies are read; a policy on ``context.era`` tells the two protocol eras
apart; an OAuth subject's scopes are the principal's, so a policy can say what a scope may run."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import PromptReference

from ..blocks import text_of
from ..gateway.test_relay import README, _serve
from ..server.test_serve import CLIENT_TOKENS, TOKEN, _client, _start

pytestmark = pytest.mark.anyio
UPSTREAM = "toolkeeper://mcp/up/"

TOOLS = '''
from toolkeeper import tool
from toolkeeper.offers.prompts import prompt
from toolkeeper.offers.resources import resource


@tool
def read_note(path: str) -> str:
    """Read a note."""
    return f"note {path}"


@resource("notes://public")
def public() -> str:
    return "public words"


@resource("notes://secret")
def secret() -> str:
    return "secret words"


@prompt
def review(topic: str) -> str:
    """Review a topic."""
    return f"Review {topic}."
'''
OFFERS = '''
@id("no-secret-notes")
@reason("the secret notes are for people only")
forbid (principal, action == Action::"read_resource", resource)
when { resource.uri like "notes://secret*" };

@id("no-upstream-readme")
@reason("the upstream's readme is internal")
forbid (principal, action == Action::"read_resource", resource)
when { resource.server == "up" && resource.uri like "*readme*" };

@id("review-for-reviewers")
@reason("the review prompt is for the review bot")
forbid (principal, action == Action::"get_prompt", resource == Prompt::"review")
unless { principal == Client::"review-bot" };

@id("upstream-prompts-for-nobody")
forbid (principal, action == Action::"get_prompt", resource)
when { resource.server == "up" };
'''


def _project(tmp_path: Path, policy: str, *, gateway: bool = False) -> Path:
    (tmp_path / "tools.py").write_text(TOOLS)
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "team.cedar").write_text(policy)
    config = tmp_path / "toolkeeper.toml"
    if gateway:
        _serve(tmp_path)  # writes toolkeeper.toml with the upstream "up"
    else:
        config.write_text("")
    return config


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=20) in (0, 130)
    assert proc.stderr is not None
    return proc.stderr.read()


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("TOOLKEEPER_TOKEN", TOKEN)
    config = _project(tmp_path, OFFERS, gateway=True)
    proc, url = _start(tmp_path, "--config", str(config), tools=str(tmp_path / "tools.py"))
    yield url
    assert "Traceback" not in _stop(proc)


async def _refusal(client: Client, read: str = "", prompt: str = "") -> str:
    with pytest.raises(MCPError) as caught:
        if read:
            await client.read_resource(read)
        else:
            await client.get_prompt(prompt, {"name": "Ada", "topic": "x"})
    return caught.value.error.message


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # subscribe
async def test_resources_and_prompts_are_served_or_refused_by_policy(served: str,
                                                                     tmp_path: Path) -> None:
    async with _client(served) as client:
        await _until_relayed(client)
        resources = [str(r.uri) for r in (await client.list_resources()).resources]
        prompts = [p.name for p in (await client.list_prompts()).prompts]
        public = await client.read_resource("notes://public")
        secret = await _refusal(client, read="notes://secret")
        readme = await _refusal(client, read=README)
        day = await client.read_resource("toolkeeper://mcp/up/file:///logs/monday")
        review = await _refusal(client, prompt="review")
        greet = await _refusal(client, prompt="up-greet")
    async with _http(served, "legacy") as client:  # what may not be read is not watched
        await client.subscribe_resource("notes://public")
        with pytest.raises(MCPError, match="forbidden by policy no-secret-notes"):
            await client.subscribe_resource("notes://secret")
        with pytest.raises(MCPError, match="forbidden by policy review-for-reviewers"):
            await client.complete(PromptReference(name="review"), {"name": "topic", "value": ""})
    assert (resources, prompts) == (["notes://public"], [])  # only what it may read or get
    assert "public words" in public.contents[0].text  # type: ignore[union-attr]
    assert secret == ("reading resource 'notes://secret' is forbidden by policy no-secret-notes "
                      "(the secret notes are for people only); do not retry it unless the user "
                      "asks")
    assert "policy no-upstream-readme (the upstream's readme is internal)" in readme
    assert day.contents  # another relayed resource of the same upstream still reads
    assert "getting prompt 'review' is forbidden by policy review-for-reviewers (the review " \
        "prompt is for the review bot)" in review
    assert "forbidden by policy upstream-prompts-for-nobody" in greet
    assert _refusals(tmp_path, 6) == [  # each refusal is on record; a listing leaving it out not
        ("completion/complete", '{"name": "review", "server": ""}',
         "policy_denied: review-for-reviewers"),
        ("prompts/get", '{"name": "review", "server": ""}', "policy_denied: review-for-reviewers"),
        ("prompts/get", '{"name": "up-greet", "server": "up"}',
         "policy_denied: upstream-prompts-for-nobody"),
        ("resources/read", '{"uri": "notes://secret", "server": ""}',
         "policy_denied: no-secret-notes"),
        ("resources/read", f'{{"uri": "{README}", "server": "up"}}',
         "policy_denied: no-upstream-readme"),
        ("resources/subscribe", '{"uri": "notes://secret", "server": ""}',
         "policy_denied: no-secret-notes")]
    bot = subprocess.run(
        [*_cli(), "tokens", "add", "review-bot", "--state-dir", str(tmp_path / "state")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert bot.returncode == 0, bot.stderr
    async with _client(served, bot.stdout.strip()) as client:
        got = await client.get_prompt("review", {"topic": "the release"})
        shown = [p.name for p in (await client.list_prompts()).prompts]
    assert shown == ["review"]
    assert got.messages[0].content.text == "Review the release."  # type: ignore[union-attr]


def _refusals(tmp_path: Path, count: int) -> list[tuple[str, str, str]]:
    """The audit log's refused reads and gets, sorted, once ``count`` are written (30 s at
    most: the log is written by a thread of its own)."""
    rows: list[tuple[str, str, str]] = []
    deadline = time.monotonic() + 30
    while len(rows) < count and time.monotonic() < deadline:
        with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
            rows = sorted(db.execute("SELECT tool, arguments, decision FROM audit WHERE status "
                                     "= 'denied' AND tool LIKE '%/%'").fetchall())
        if len(rows) < count:
            time.sleep(0.05)
    return rows


def _cli() -> list[str]:
    return [sys.executable, "-m", "toolkeeper.cli"]


async def _until_relayed(client: Client) -> None:
    """Wait (30 s at most) until the upstream's resource templates are listed (its readme is
    not: a listing shows only what the client may read)."""
    seen: list[str] = []
    with anyio.move_on_after(30):
        while not any(t.startswith(UPSTREAM) for t in seen):
            listed = (await client.list_resource_templates()).resource_templates
            seen = [t.uri_template for t in listed]
            if not any(t.startswith(UPSTREAM) for t in seen):
                await anyio.sleep(0.1)
    assert any(t.startswith(UPSTREAM) for t in seen), \
        f"the upstream's templates were not listed within 30 s: {seen}"


SCRIPT = "n = read_note(path='a')\nresult = n.status\n"
ERAS = '''
@id("per-request-only")
@reason("notes are read by clients of the per-request era")
forbid (principal, action == Action::"read_note", resource)
when { context.era == "handshake" };

@id("a-known-revision")
forbid (principal, action in Action::"call_tool", resource)
when { context.protocol == "" };
'''


def _http(url: str, mode: str) -> Client:
    """The official client over Streamable HTTP: ``legacy`` (the handshake era) or ``auto``
    (the per-request era)."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {CLIENT_TOKENS[url]}"},
                              timeout=60)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode)


async def test_a_policy_on_the_protocol_era_tells_the_two_eras_apart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLKEEPER_TOKEN", TOKEN)
    config = _project(tmp_path, ERAS)
    config.write_text('[codemode]\nenabled = true\ntools = ["read_note"]\n')
    proc, url = _start(tmp_path, "--config", str(config), tools=str(tmp_path / "tools.py"))
    seen = {}
    try:
        for mode in ("legacy", "auto"):
            async with _http(url, mode) as client:
                direct = await client.call_tool("read_note", {"path": "a"})
                script = await client.call_tool("tool_chain", {"code": SCRIPT})
            seen[mode] = (direct.is_error, text_of(direct.content[0]),
                          text_of(script.content[0]))
    finally:
        assert "Traceback" not in _stop(proc)
    failed, said, run = seen["legacy"]
    assert failed and "forbidden by policy per-request-only (notes are read by clients of " \
        "the per-request era)" in said
    assert "call 1: read_note → denied (policy_denied)" in run  # a script's calls: its era
    assert seen["auto"][:2] == (False, "note a")
    assert "call 1: read_note → ok" in seen["auto"][2], seen["auto"][2]


async def test_without_the_default_set_a_read_nothing_permits_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLKEEPER_TOKEN", TOKEN)
    config = _project(tmp_path, 'permit (principal, action == Action::"get_prompt", resource);')
    config.write_text("[policy]\ndefaults = false\n")
    proc, url = _start(tmp_path, "--config", str(config), tools=str(tmp_path / "tools.py"))
    try:
        async with _client(url) as client:
            refused = await _refusal(client, read="notes://public")
            got = await client.get_prompt("review", {"topic": "it"})
    finally:
        assert "Traceback" not in _stop(proc)
    assert refused == ("reading resource 'notes://public' is refused: no policy permits it "
                       "(deny by default); the operator can permit it (permit (principal, "
                       'action == Action::"read_resource", resource);)')
    assert got.messages[0].content.text == "Review it."  # type: ignore[union-attr]


SUNDAY = """
@id("no-sunday-log")
forbid (principal, action == Action::"read_resource", resource)
when { resource.uri like "toolkeeper://mcp/up/file:///logs/sunday*" };
"""


async def test_a_uri_prefix_in_a_policy_holds_against_other_spellings_of_the_same_resource(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A relayed URI was judged as the client spelled it and forwarded as spelled: the
    upstream read ``file:///logs/./sunday`` as the log a ``like`` prefix forbids."""
    monkeypatch.setenv("TOOLKEEPER_TOKEN", TOKEN)
    config = _project(tmp_path, SUNDAY, gateway=True)
    proc, url = _start(tmp_path, "--config", str(config), tools=str(tmp_path / "tools.py"))
    spellings = ["file:///logs/./sunday", "file:////logs/sunday", "FILE:///logs/sunday",
                 "file:///logs/%73unday", "file:///logs/x/../sunday", "file:///logs%2Fsunday",
                 "file:///logs/sunday"]
    try:
        async with _client(url) as client:
            await _until_relayed(client)
            monday = await client.read_resource(UPSTREAM + "file:///logs/./monday")
            refused = [await _refusal(client, read=UPSTREAM + spelled) for spelled in spellings]
    finally:
        assert "Traceback" not in _stop(proc)
    assert "log of monday" in text_of(monday.contents[0])
    assert str(monday.contents[0].uri) == UPSTREAM + "file:///logs/monday"
    assert all("forbidden by policy no-sunday-log" in said for said in refused), refused
    assert "'toolkeeper://mcp/up/file:///logs/sunday'" in refused[0]  # as it was judged


def test_an_ask_on_a_read_stops_serve_with_one_line(tmp_path: Path) -> None:
    config = _project(tmp_path, '@ask\npermit (principal, action == Action::"read_resource", '
                      "resource);")
    started = subprocess.run(
        [*_cli(), "serve", str(tmp_path / "tools.py"), "--no-builtins", "--port", "0",
         "--config", str(config), "--state-dir", str(tmp_path / "state")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "TOOLKEEPER_TOKEN": TOKEN})
    lines = started.stderr.strip().splitlines()
    assert started.returncode != 0 and len(lines) == 1, started.stderr
    assert lines[0] == (f"error: {tmp_path / 'policies' / 'team.cedar'}:1: @ask on "
                        "read_resource: a person is never asked about reading a resource or "
                        "getting a prompt; write a permit (served) or a forbid (refused) "
                        "instead, or ask about the tools that reach the data")


async def test_over_stdio_the_launching_process_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "team.cedar").write_text('''@id("no-readme-over-stdio")
forbid (principal == Client::"stdio", action == Action::"read_resource", resource)
when { resource.server == "up" && resource.uri like "*readme*" };''')
    with (tmp_path / "serve.log").open("w") as errlog:
        async with Client(stdio_client(_serve(tmp_path), errlog=errlog)) as client:
            await _until_relayed(client)
            refused = await _refusal(client, read=README)
            day = await client.read_resource("toolkeeper://mcp/up/file:///logs/monday")
    assert "forbidden by policy no-readme-over-stdio" in refused
    assert day.contents
