"""A person is asked only when they can change the outcome: through a real ``toolkeeper serve``
and the official MCP client, a call the tool's own rules refuse — a shell command outside the
allowlist, a refused git option, a path outside the workspace, a fetch of an address inside the
network — is refused at once with the tool's own message, and no approval request is made (the
store and the page's list stay empty). A user's tool declares its own check; one that breaks is
an error naming the tool. serve's start lines name the tools that can never run here."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolkeeper.sandbox import UNPRIVILEGED_UID

from ..workspaces import hand_over
from .test_serve import TOKEN, _client, _started

pytestmark = pytest.mark.anyio

OPERATOR = {"Authorization": f"Bearer {TOKEN}"}
METADATA = "http://169.254.169.254/latest/meta-data/"


@dataclass
class Served:
    proc: subprocess.Popen[str]
    url: str
    login: str
    workspace: Path


def _serve(root: Path, *args: str, config: bool = True) -> Served:
    """``toolkeeper serve`` with ``args`` and the built-ins of ``root/toolkeeper.toml`` (or,
    without ``config``, the minimal built-ins over ``root/ws``, as ``make run`` serves)."""
    env = {**os.environ, "TOOLKEEPER_TOKEN": TOKEN}
    where = ["--config", str(root / "toolkeeper.toml")] if config else [
        "--workspace", str(root / "ws")]
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkeeper.cli", "serve", *args, *where, "--port", "0",
         "--state-dir", str(root / "state"), "--approval-wait", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=root)
    url = _started(proc, root / "state")
    assert proc.stdout is not None
    login = proc.stdout.readline().split()[2]  # "approval page: URL/login?code=… (…)"
    return Served(proc, url, login, root / "ws")


def _stop(served: Served) -> str:
    """Stop the server; its stderr (which never holds a traceback)."""
    served.proc.send_signal(signal.SIGINT)
    assert served.proc.wait(timeout=30) in (0, 130)
    assert served.proc.stderr is not None
    err = served.proc.stderr.read()
    assert "Traceback" not in err, err
    return err


def _root(config: str) -> Path:
    """A directory the sandbox's uid can reach, holding a workspace (a git repository with a
    file) and ``toolkeeper.toml`` (``{ws}`` in ``config`` is the workspace)."""
    root = Path(tempfile.mkdtemp(prefix="tk-preflight-"))
    root.chmod(0o755)
    ws = root / "ws"
    ws.mkdir()
    subprocess.run(["git", "init", "-q", str(ws)], check=True, timeout=60)
    (ws / "notes.txt").write_text("hello\n")
    (root / "outside.txt").write_text("OUTSIDE")
    hand_over(ws)
    (root / "toolkeeper.toml").write_text(config.replace("{ws}", str(ws)))
    return root


BUILTINS = """
[security]
workspace = "{ws}"

[web_fetch]
enabled = true

[codemode]
enabled = true
tools = ["web_fetch"]
"""


@pytest.fixture(scope="module")
def builtins() -> Iterator[Served]:
    """One server for the built-ins' cases (each test looks only at its own tool's rows)."""
    root = _root(BUILTINS)
    served = _serve(root)
    yield served
    _stop(served)
    shutil.rmtree(root, ignore_errors=True)


def _until(read: Callable[[], Any], done: Callable[[Any], bool], what: str) -> Any:
    """``read()`` once ``done`` holds for it (within 30 s, else the test fails with it)."""
    deadline = time.monotonic() + 30
    while True:
        value = read()
        if done(value) or time.monotonic() > deadline:
            assert done(value), f"{what}: {value!r}"
            return value
        time.sleep(0.05)


def _requests(served: Served, tool: str) -> list[dict[str, Any]]:
    listed = httpx.get(f"{served.url}/api/approvals", headers=OPERATOR, timeout=30).json()
    return [a for a in listed["approvals"] if a["tool"] == tool]


def _audited(served: Served, tool: str, count: int) -> list[dict[str, Any]]:
    def read() -> list[dict[str, Any]]:
        entries = httpx.get(f"{served.url}/api/audit", params={"tool": tool}, headers=OPERATOR,
                            timeout=30).json()["entries"]
        return [e for e in entries if e["tool"] == tool]
    rows: list[dict[str, Any]] = _until(read, lambda rows: len(rows) >= count,
                                        f"audit rows of {tool}")
    return rows


async def _call(served: Served, tool: str, arguments: dict[str, Any]) -> tuple[bool, str, Any]:
    async with _client(served.url) as client:
        result = await client.call_tool(tool, arguments)
    text = result.content[0].text  # type: ignore[union-attr]
    return result.is_error, text, result.structured_content


def _refused_at_once(served: Served, tool: str, count: int = 1) -> None:
    """No approval request for ``tool``, and its audit rows say pre-flight refused it."""
    assert _requests(served, tool) == []
    rows = _audited(served, tool, count)
    assert [(r["status"], r["decision"], r["approval_id"]) for r in rows] == [
        ("denied", "refused by preflight", None)] * count


async def test_a_shell_command_outside_the_allowlist_is_refused_without_asking(
        builtins: Served) -> None:
    failed, text, _ = await _call(builtins, "shell", {"command": "curl -s http://example.com"})
    assert failed and text.startswith("'curl' is not an allowed command (rule "
                                      "security.allowed_commands); allowed: "), text
    assert text.endswith("Add it to security.allowed_commands to allow it")
    _refused_at_once(builtins, "shell")


async def test_a_refused_git_option_is_refused_without_asking(builtins: Served) -> None:
    failed, text, _ = await _call(builtins, "git_operations",
                                  {"operation": "status", "args": ["--output=/tmp/x"]})
    assert failed and text.startswith("git status option '--output=/tmp/x' is refused "
                                      "(allowed: "), text
    _refused_at_once(builtins, "git_operations")


async def test_a_path_outside_the_workspace_is_refused_without_asking(builtins: Served) -> None:
    failed, text, _ = await _call(builtins, "file_write",
                                  {"path": "/etc/cron.d/toolkeeper", "content": "* * * * * x"})
    assert failed and text == ("'/etc/cron.d/toolkeeper' is refused: it is outside the "
                               f"workspace {builtins.workspace}"), text
    failed, text, _ = await _call(builtins, "file_edit",
                                  {"path": "../outside.txt", "old": "OUT", "new": "IN"})
    assert failed and text == "'../outside.txt' is refused: it resolves outside the workspace"
    _refused_at_once(builtins, "file_write")
    _refused_at_once(builtins, "file_edit")
    assert (builtins.workspace.parent / "outside.txt").read_text() == "OUTSIDE"


async def test_a_fetch_of_an_address_inside_the_network_is_refused_without_asking(
        builtins: Served) -> None:
    """From a script, where a fetch asks a person (a script's calls run under the SAFE
    ceiling), the refused address is the fetch's own answer at once."""
    script = f"r = web_fetch(url={METADATA!r})\nresult = [r.status, r.text]"
    _, text, structured = await _call(builtins, "tool_chain", {"code": script})
    assert structured is not None, text
    assert structured["value"] == [
        "denied", "'169.254.169.254' resolves to 169.254.169.254, which is not a public "
        "address; requests inside the network are refused (rule http.non_global_address)"]
    _refused_at_once(builtins, "web_fetch")


async def test_the_page_lists_nothing_for_calls_the_tools_refuse(builtins: Served) -> None:
    await _call(builtins, "shell", {"command": "nc -l 9"})
    await _call(builtins, "file_write", {"path": "../escape.txt", "content": "x"})
    page = httpx.Client(base_url=builtins.url, follow_redirects=False, timeout=30)
    assert page.get(builtins.login.removeprefix(builtins.url)).status_code == 303
    inbox = page.get("/fragments/inbox")
    assert inbox.status_code == 200 and "Nothing is waiting." in inbox.text, inbox.text
    listed = httpx.get(f"{builtins.url}/api/approvals", headers=OPERATOR, timeout=30).json()
    assert listed["approvals"] == []


TOOLS = '''
from toolkeeper import PolicyViolationError, ToolRisk, tool


def no_production(service: str) -> None:
    if service == "production":
        raise PolicyViolationError(
            "restarting 'production' is refused (rule ops.protected_services); restart it "
            "from the runbook", tool_name="restart")


@tool(risk=ToolRisk.HIGH, preflight=no_production)
def restart(service: str) -> str:
    """Restart a service."""
    no_production(service)
    return f"restarted {service}"


def inventory(service: str) -> None:
    raise KeyError("inventory")


@tool(risk=ToolRisk.HIGH, preflight=inventory)
def deploy(service: str) -> str:
    """Deploy a service."""
    return f"deployed {service}"
'''


async def test_a_users_tool_declares_its_own_pre_flight() -> None:
    root = _root("[security]\nworkspace = \"{ws}\"\n")
    (root / "ops_tools.py").write_text(TOOLS)
    served = _serve(root, str(root / "ops_tools.py"))
    try:
        refused = await _call(served, "restart", {"service": "production"})
        asked = await _call(served, "restart", {"service": "web"})
        broken = await _call(served, "deploy", {"service": "web"})
        assert refused[:2] == (True, "restarting 'production' is refused (rule "
                                     "ops.protected_services); restart it from the runbook")
        assert asked[0] and "waiting for approval" in asked[1]  # it passed: a person decides
        assert broken[0] and broken[1].startswith(
            "the pre-flight check of tool 'deploy' failed (KeyError: 'inventory'), so the call "
            "was refused and nothing ran"), broken[1]
        waiting = [(a["tool"], a["arguments"]) for a in _requests(served, "restart")]
        assert waiting == [("restart", {"service": "web"})] and _requests(served, "deploy") == []
        rows = _audited(served, "deploy", 1)
        assert [(r["status"], r["error_code"], r["decision"]) for r in rows] == [
            ("error", "did_not_run", "refused by preflight")]
    finally:
        err = _stop(served)
        shutil.rmtree(root, ignore_errors=True)
    assert "the pre-flight check of tool 'deploy' failed" in err  # one line for the operator


BLOCKED = '''
from toolkeeper import tool
from toolkeeper.builtins.preflight import Preflight


def no_tickets(title: str) -> None:
    return None


@tool(preflight=Preflight(no_tickets, blocked=lambda: "needs TICKETS_URL; set it"))
def ticket(title: str) -> str:
    """Open a ticket."""
    return title
'''


async def test_the_start_lines_name_each_tool_that_can_never_run_here() -> None:
    """As ``make run`` serves, as root: commands run as uid 65534, which cannot reach a
    workspace below a private folder, so shell can never run there; serve says so as it
    starts, and a call is refused at once, not after a person approved it. A user's tool may
    say why it can never run too."""
    root = _root("")
    (root / "ops_tools.py").write_text(BLOCKED)
    private = root / "private"
    private.mkdir(mode=0o700)
    (root / "ws").rename(private / "ws")
    (root / "ws").symlink_to(private / "ws")  # --workspace names it; it resolves below
    served = _serve(root, str(root / "ops_tools.py"), config=False)
    try:
        failed, text, _ = await _call(served, "shell", {"command": "ls"})
        requests = _requests(served, "shell")
    finally:
        err = _stop(served)
        shutil.rmtree(root, ignore_errors=True)
    lines = [line for line in err.splitlines() if "can never run here" in line]
    never = "toolkeeper: tool 'ticket' can never run here: needs TICKETS_URL; set it"
    if os.geteuid() != 0:  # commands run as this user, who reaches the workspace
        assert lines == [never] and not failed, (err, text)
        return
    reason = (f"commands run as uid {UNPRIVILEGED_UID} because toolkeeper runs as root, and "
              f"{private} is not reachable by it; run toolkeeper as a non-root user, or make "
              "the workspace's parents searchable (chmod o+x)")
    assert lines == [never, (
        f"toolkeeper: tool 'shell' can never run here: {reason}. Fix that, or set "
        "security.allow_unconfined = true (every call then needs approval)")], err
    assert failed and text == f"commands are refused: {reason}. Fix that, or set " \
        "security.allow_unconfined = true (every call then needs approval)"
    assert requests == []
