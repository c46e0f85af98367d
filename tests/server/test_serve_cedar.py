"""Cedar policies in a real ``toolkeeper serve``, called with the official MCP client: allowed,
asked or denied by client, tool and argument; a rule stored from the operator's terminal runs
the next similar call without asking while a different argument still asks, and stops when
revoked; a bad policy file stops serve with one line; no tool a client calls reads or writes a
policy."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from ..blocks import text_of
from ..processes import no_traceback
from .test_serve import CLIENT_TOKENS, TOKEN, _client, _start, _started

pytestmark = pytest.mark.anyio

TOOLS = '''
from toolkeeper import ToolRisk, tool


@tool(risk=ToolRisk.HIGH)
def deploy(service: str, env: str) -> str:
    """Deploy a service to an environment."""
    return f"deployed {service} to {env}"


@tool
def read_note(path: str) -> str:
    """Read a note."""
    return f"note {path}"
'''
TEAM = '''// reviewed in version control
@id("no-prod")
@reason("production deploys go through the release train")
forbid (principal, action == Action::"deploy", resource)
when { context.args.env == "prod" };

@id("ci-deploys-staging")
permit (principal == Client::"ci", action == Action::"deploy", resource)
when { context.args.env == "staging" };

@id("secrets-ask") @ask
permit (principal, action == Action::"read_note", resource)
when { context.args.path like "secrets/*" };
'''


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "toolkeeper.cli", *args], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)


def _env(home: Path) -> dict[str, str]:
    """This environment without toolkeeper's or XDG settings, the operator's token set."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLKEEPER_", "XDG_"))}
    return {**kept, "TOOLKEEPER_TOKEN": TOKEN, "HOME": str(home)}


def _project(tmp_path: Path, policy: str = TEAM) -> Path:
    (tmp_path / "tools.py").write_text(TOOLS)
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "team.cedar").write_text(policy)
    config = tmp_path / "toolkeeper.toml"
    config.write_text("")
    return config


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    config = _project(tmp_path)
    proc, url = _start(tmp_path, "--config", str(config), tools=str(tmp_path / "tools.py"))
    yield url
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=20) in (0, 130)
    no_traceback(proc)


async def _call(url: str, tool: str, token: str | None = None, **arguments: str) -> str:
    async with _client(url, token) as client:
        result = await client.call_tool(tool, arguments)
    text = text_of(result.content[0])
    if not result.is_error:
        return "ok: " + text
    return ("pending: " if "waiting for approval" in text else "refused: ") + text


async def test_calls_are_allowed_asked_or_denied_by_client_tool_and_argument(
        served: str, tmp_path: Path) -> None:
    ci = _cli(tmp_path, "tokens", "add", "ci", "--state-dir", str(tmp_path / "state"))
    assert ci.returncode == 0, ci.stderr
    ci_token = ci.stdout.strip()
    assert await _call(served, "deploy", ci_token, service="web", env="staging") == \
        "ok: deployed web to staging"
    assert (await _call(served, "deploy", service="web", env="staging")).startswith("pending")
    prod = await _call(served, "deploy", ci_token, service="web", env="prod")
    assert prod.startswith("refused") and "policy no-prod (production deploys go through " \
        "the release train)" in prod
    assert await _call(served, "read_note", path="notes/a") == "ok: note notes/a"
    assert (await _call(served, "read_note", path="secrets/k")).startswith("pending")
    with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
        rows = db.execute("SELECT tool, status, error_code, decision, approver FROM audit "
                          "ORDER BY seq").fetchall()
        reason = db.execute("SELECT request FROM approvals WHERE tool = 'read_note'").fetchone()
    assert rows[0] == ("deploy", "ok", None, "allowed by ci-deploys-staging", "policy")
    assert rows[2] == ("deploy", "denied", "policy_denied", "policy_denied: no-prod", "policy")
    assert "policy secrets-ask asks" in reason[0]


async def _poll(url: str, expect: str, **arguments: str) -> str:
    """Call ``deploy`` until its answer starts with ``expect`` (30 s at most); the last."""
    deadline, seen = time.monotonic() + 30, ""
    while time.monotonic() < deadline:
        seen = await _call(url, "deploy", **arguments)
        if seen.startswith(expect):
            return seen
        await anyio.sleep(0.25)  # a pace for the poll, well under the server's rate limit
    pytest.fail(f"deploy did not answer {expect!r} within 30 s; last: {seen!r}")


async def test_a_stored_rule_runs_the_similar_call_and_still_asks_for_another_argument(
        served: str, tmp_path: Path) -> None:
    state = ["--state-dir", str(tmp_path / "state")]
    added = _cli(tmp_path, "policy", "add", 'permit (principal == Client::"default", action == '
                 'Action::"deploy", resource) when { context.args.env == "staging" };',
                 str(tmp_path / "tools.py"), "--no-builtins", "--config",
                 str(tmp_path / "toolkeeper.toml"), *state, "--reason", "staging is fine",
                 "--author", "ann", "--expires", "8h")
    assert added.returncode == 0, added.stderr
    rule = added.stdout.split()[0]
    await _poll(served, "ok", service="web", env="staging")
    await _poll(served, "pending", service="web", env="qa")
    deadline, found = time.monotonic() + 30, dict[str, Any]()
    while time.monotonic() < deadline and not found.get("uses"):  # counted off the call path
        listed = _cli(tmp_path, "policy", "list", str(tmp_path / "tools.py"), "--no-builtins",
                      "--config", str(tmp_path / "toolkeeper.toml"), *state, "--json")
        found = next(r for r in json.loads(listed.stdout)["rules"] if r["id"] == rule)
    assert (found["author"], found["reason"], found["uses"] >= 1) == ("ann", "staging is fine",
                                                                        True), found
    assert _cli(tmp_path, "policy", "revoke", rule, *state).returncode == 0
    await _poll(served, "pending", service="web", env="staging")


async def test_a_stored_rule_stops_deciding_at_its_end(served: str, tmp_path: Path) -> None:
    added = _cli(tmp_path, "policy", "add", 'permit (principal, action == Action::"deploy", '
                 'resource) when { context.args.env == "qa" };', str(tmp_path / "tools.py"),
                 "--no-builtins", "--config", str(tmp_path / "toolkeeper.toml"), "--state-dir",
                 str(tmp_path / "state"), "--expires", "8s")
    assert added.returncode == 0, added.stderr
    await _poll(served, "ok", service="web", env="qa")  # while it lasts
    await _poll(served, "pending", service="web", env="qa")  # then the default set asks


def test_a_bad_policy_file_stops_serve_with_one_line(tmp_path: Path) -> None:
    config = _project(tmp_path, TEAM.replace('context.args.env == "prod"',
                                             'context.args.environment == "prod"'))
    done = subprocess.run([sys.executable, "-m", "toolkeeper.cli", "serve",
                           str(tmp_path / "tools.py"), "--no-builtins", "--port", "0",
                           "--state-dir", str(tmp_path / "state"), "--config", str(config)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=_env(tmp_path))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert f"{tmp_path / 'policies' / 'team.cedar'}:2: tool 'deploy' has no argument " \
        "'environment'" in lines[0] and "did you mean 'env'?" in lines[0]


async def test_no_tool_a_client_calls_reads_or_writes_a_policy(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    config = _project(project)
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkeeper.cli", "serve", str(project / "tools.py"), "--port",
         "0", "--state-dir", str(tmp_path / "state"), "--approval-wait", "0", "--config",
         str(config), "--workspace", str(project)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        env=_env(tmp_path))
    try:
        url = _started(proc, tmp_path / "state")
        async with _client(url) as client:
            read = await client.call_tool("file_read", {"path": "policies/team.cedar"})
            found = await client.call_tool("glob_search", {"pattern": "**/*.cedar"})
        for path in ("policies/team.cedar", "policies/open.cedar", "open.cedar"):
            wrote = await _call(url, "file_write", path=path, content="permit (principal, "
                                "action, resource);")
            assert not wrote.startswith("ok"), wrote
        assert read.is_error and "forbidden" in text_of(read.content[0])
        assert "team.cedar" not in (text_of(found.content[0]) if found.content else "")
        assert not (project / "open.cedar").exists()
        assert (project / "policies" / "team.cedar").read_text() == TEAM
        api = httpx.get(f"{url}/api/policies", timeout=10, headers={
            "Authorization": f"Bearer {CLIENT_TOKENS[url]}"})
        assert api.status_code in (401, 403, 404)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)


async def test_a_rule_stored_through_one_replica_decides_on_the_other(
        tmp_path: Path, postgres_url: str) -> None:
    config = _project(tmp_path)
    started = [_start(tmp_path, "--config", str(config), "--store", postgres_url,
                      tools=str(tmp_path / "tools.py"), state=f"r{i}") for i in range(2)]
    (_, a), (_, b) = started
    CLIENT_TOKENS[b] = CLIENT_TOKENS[a]  # one agent, two replicas
    try:
        assert (await _call(b, "deploy", service="web", env="staging")).startswith("pending")
        added = _cli(tmp_path, "policy", "add", 'permit (principal == Client::"default", '
                     'action == Action::"deploy", resource) when { context.args.env == '
                     '"staging" };', str(tmp_path / "tools.py"), "--no-builtins", "--config",
                     str(config), "--store", postgres_url, "--state-dir", str(tmp_path / "r0"))
        assert added.returncode == 0, added.stderr
        await _poll(b, "ok", service="web", env="staging")
        await _poll(a, "ok", service="web", env="staging")
        assert (await _call(b, "deploy", service="web", env="qa")).startswith("pending")
    finally:
        for proc, _ in started:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)
