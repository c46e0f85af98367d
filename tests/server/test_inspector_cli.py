"""The MCP Inspector's command line (npm ``@modelcontextprotocol/inspector``, pinned beside the
conformance suite and installed by ``make conformance``) — a client nobody here wrote — against
the real ``toolkeeper serve``: over HTTP with the client token the server printed, and over
stdio launched from the very file ``toolkeeper install claude-desktop`` wrote. A call that
waits for a person returns the approved result, and the tool ran once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .test_serve import CLIENT_TOKENS, ROOT, TOKEN, _start
from .test_serve_pause import _api

LAUNCHER = (ROOT / ".conformance" / "node_modules" / "inspector-2.12.0" / "clients" / "launcher"
            / "build" / "index.js")

TOOLS = '''
from pathlib import Path

from toolkeeper import ToolRisk, tool

LEDGER = Path(__file__).with_name("ledger")


@tool(risk=ToolRisk.CRITICAL)
def deploy(version: str) -> str:
    """Deploy a version (needs approval)."""
    with LEDGER.open("a") as out:
        out.write(f"deploy {version}\\n")
    return f"deployed {version}"
'''


@pytest.fixture
def home(tmp_path: Path) -> Path:
    if not LAUNCHER.exists():
        pytest.skip("the MCP Inspector is not installed: run `make conformance`")
    (tmp_path / "tools.py").write_text(TOOLS)
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


def _inspector(home: Path, cwd: Path, *args: str) -> subprocess.Popen[str]:
    """``mcp-inspector --cli ARGS``, as a user runs it (its secrets kept in memory: this
    machine has no keychain)."""
    env = {**os.environ, "HOME": str(home), "MCP_INSPECTOR_SECRET_STORE": "memory"}
    env.pop("TOOLKEEPER_TOKEN", None)
    return subprocess.Popen(["node", str(LAUNCHER), "--cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)


def _answer(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, (out, err)
    return json.loads(out)  # type: ignore[no-any-return]


def _pending_id(listed: Any, proc: subprocess.Popen[str], deadline: float) -> str | None:
    """The one pending request's id, once listed; fails if the Inspector ended first."""
    if proc.poll() is not None:
        seen = proc.communicate(timeout=30)
        pytest.fail(f"the Inspector ended before a person decided: {seen}")
    if time.monotonic() > deadline:
        pytest.fail("no request for a person within 60 s")
    return str(listed[0]["id"]) if listed else None


def test_the_inspector_over_http_gets_the_approved_result_once(home: Path) -> None:
    tmp = home.parent
    server, url = _start(tmp, "--approval-wait", "50", tools=str(tmp / "tools.py"))
    try:
        inspector = _inspector(home, tmp, f"{url}/mcp", "--header",
                               f"Authorization: Bearer {CLIENT_TOKENS[url]}", "--method",
                               "tools/call", "--tool-name", "deploy", "--tool-arg", "version=v1")
        deadline = time.monotonic() + 60
        while (request := _pending_id(_api(url, "/api/approvals?state=pending").json()[
                "approvals"], inspector, deadline)) is None:
            time.sleep(0.1)
        decided = _api(url, f"/api/approvals/{request}/decision", {"decision": "approve"})
        assert decided.status_code == 200, decided.text
        answer = _answer(inspector)
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)
    assert answer["isError"] is False and answer["content"] == [
        {"type": "text", "text": "deployed v1"}]
    assert (tmp / "ledger").read_text() == "deploy v1\n"


def _toolkeeper(home: Path, *args: str) -> str:
    """The ``toolkeeper`` command, as a user with this home runs it."""
    env = {**os.environ, "HOME": str(home), "COLUMNS": "200"}
    for name in ("TOOLKEEPER_TOKEN", "XDG_STATE_HOME", "XDG_CONFIG_HOME"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-m", "toolkeeper.cli", *args], capture_output=True,
                          text=True, env=env, timeout=120, cwd=home)
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done.stdout


def test_the_inspector_launching_serve_as_the_desktop_config_says_gets_the_result_once(
        home: Path) -> None:
    tmp, config = home.parent, home / "claude_desktop_config.json"
    _toolkeeper(home, "install", "claude-desktop", str(tmp / "tools.py"), "--no-builtins",
                "--config-path", str(config))
    inspector = _inspector(home, home, "--config", str(config), "--server", "toolkeeper",
                           "--method", "tools/call", "--tool-name", "deploy", "--tool-arg",
                           "version=v2")
    try:
        deadline = time.monotonic() + 60
        while (request := _pending_id(json.loads(_toolkeeper(
                home, "approvals", "list", "--json"))["approvals"], inspector, deadline)) is None:
            time.sleep(0.2)
        assert "approved" in _toolkeeper(home, "approvals", "decide", request, "approve")
        answer = _answer(inspector)
    finally:
        if inspector.poll() is None:
            inspector.kill()
            inspector.communicate(timeout=30)
    assert answer["isError"] is False and answer["structuredContent"] == {"result": "deployed v2"}
    assert (tmp / "ledger").read_text() == "deploy v2\n"
    assert TOKEN not in config.read_text()  # the operator's token is never a client's
