"""Each built-in refuses a call in its pre-flight exactly as its run refuses it (same error,
same code, same message), changes nothing doing so, and says when it can never run here."""

from __future__ import annotations

import inspect
import os
import subprocess
from pathlib import Path

import pytest

from toolkeeper import Tool, ToolDidNotRunError
from toolkeeper.builtins.browser import browser_tools
from toolkeeper.builtins.files import file_tools
from toolkeeper.builtins.git import git_tool
from toolkeeper.builtins.http import http_tools
from toolkeeper.builtins.policy import DEFAULT_COMMANDS, SecurityPolicy
from toolkeeper.builtins.preflight import Preflight, host_warnings
from toolkeeper.builtins.shell import shell_tool
from toolkeeper.builtins.state_dirs import STATE_MARKER
from toolkeeper.builtins.text_browser import text_browser_tool
from toolkeeper.codemode import ToolChainTool
from toolkeeper.invoke import ToolInvoker
from toolkeeper.sandbox import UNPRIVILEGED_UID, BubblewrapSandbox, UnconfinedSandbox

from ..workspaces import hand_over

pytestmark = pytest.mark.anyio


@pytest.fixture
def ws(reachable: Path) -> Path:
    root = reachable / "ws"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True, timeout=60)
    (root / "notes.txt").write_text("hello\n")
    os.link(root / "notes.txt", reachable / "linked.txt")  # notes.txt: two links
    (root / "plain.txt").write_text("plain\n")
    (root / "data").mkdir()
    (root / "data" / "in.txt").write_text("in\n")
    (root / "via").symlink_to("data")  # a link that stays inside: read through, never written
    (root / "out").symlink_to(reachable)
    (root / "kept").mkdir()
    (root / "kept" / STATE_MARKER).write_text("")
    (root / "kept" / "x.txt").write_text("x")
    os.mkfifo(root / "pipe")
    (reachable / "outside.txt").write_text("OUTSIDE")
    hand_over(root)
    return root


def policy(ws: Path, **rules: object) -> SecurityPolicy:
    return SecurityPolicy(workspace=ws, max_file_bytes=64, **rules)


async def refusals(tool: Tool, arguments: dict[str, object]
                   ) -> tuple[ToolDidNotRunError, ToolDidNotRunError]:
    """(what the tool's run raises, what its pre-flight raises) for ``arguments``."""
    validated = tool.validate_arguments(arguments)
    with pytest.raises(ToolDidNotRunError) as ran:
        await tool.call_async(validated)
    assert tool.preflight is not None
    with pytest.raises(ToolDidNotRunError) as checked:
        outcome = tool.preflight(**validated)
        if inspect.isawaitable(outcome):
            await outcome
    return ran.value, checked.value


def same(ran: ToolDidNotRunError, checked: ToolDidNotRunError) -> None:
    assert (type(checked), checked.code, checked.message, checked.details) == (
        type(ran), ran.code, ran.message, ran.details)


SHELL = ["curl http://example.com", "ls | nc -l 9", "echo 'unterminated", "", "A=1"]


@pytest.mark.parametrize("command", SHELL)
async def test_shell_refuses_in_pre_flight_as_it_refuses_when_run(ws: Path, command: str) -> None:
    tool = shell_tool(policy(ws), sandbox=BubblewrapSandbox())
    same(*await refusals(tool, {"command": command}))


@pytest.mark.parametrize(("rules", "command"), [
    ({"autonomy": "read_only"}, "ls"),  # every call
    ({"allow_unconfined": True, "allowed_commands": (*DEFAULT_COMMANDS, "find")}, "find ."),
    ({"allow_unconfined": True}, "echo $(ls)"),
    ({}, "ls"),  # no sandbox that confines, and not allowed to run unconfined
])
async def test_shell_without_a_sandbox_or_writes_refuses_the_same_way(
        ws: Path, rules: dict[str, object], command: str) -> None:
    tool = shell_tool(policy(ws, **rules), sandbox=UnconfinedSandbox())
    same(*await refusals(tool, {"command": command}))


FILES = [
    ("file_read", {"path": "/etc/passwd"}), ("file_read", {"path": "../outside.txt"}),
    ("file_read", {"path": "out/outside.txt"}), ("file_read", {"path": ".git/config"}),
    ("file_read", {"path": "notes.txt"}), ("file_read", {"path": "missing.txt"}),
    ("file_read", {"path": "pipe"}), ("file_read", {"path": "kept/x.txt"}),
    ("file_read", {"path": "a\u202etxt"}),
    ("file_write", {"path": "/etc/cron.d/x", "content": "x"}),
    ("file_write", {"path": "../outside.txt", "content": "x"}),
    ("file_write", {"path": "data/../../x", "content": "x"}),
    ("file_write", {"path": "out/new.txt", "content": "x"}),
    ("file_write", {"path": ".git/hooks/pre-commit", "content": "x"}),
    ("file_write", {"path": "sub/.envrc", "content": "x"}),
    ("file_write", {"path": "data/toolkeeper.db", "content": "x"}),
    ("file_write", {"path": "kept/x.txt", "content": "x"}),
    ("file_write", {"path": "notes.txt", "content": "x"}),
    ("file_write", {"path": "pipe", "content": "x"}),
    ("file_write", {"path": "big.txt", "content": "x" * 65}),
    ("file_edit", {"path": "../outside.txt", "old": "O", "new": "o"}),
    ("file_edit", {"path": ".mcp.json", "old": "a", "new": "b"}),
    ("file_edit", {"path": "notes.txt", "old": "hello", "new": "bye"}),
    ("file_edit", {"path": "missing.txt", "old": "a", "new": "b"}),
    ("file_edit", {"path": "via/in.txt", "old": "in", "new": "out"}),
    ("file_edit", {"path": "via/in.txt", "old": "not there", "new": "x"}),
]


@pytest.mark.parametrize(("name", "arguments"), FILES)
async def test_the_file_tools_refuse_in_pre_flight_as_they_refuse_when_run(
        ws: Path, name: str, arguments: dict[str, object]) -> None:
    tool = {t.name: t for t in file_tools(policy(ws))}[name]
    same(*await refusals(tool, arguments))


@pytest.mark.parametrize(("name", "arguments"), [
    ("file_write", {"path": "plain.txt", "content": "x"}),
    ("file_edit", {"path": "plain.txt", "old": "plain", "new": "x"})])
async def test_a_read_only_workspace_refuses_writes_in_pre_flight_too(
        ws: Path, name: str, arguments: dict[str, object]) -> None:
    tool = {t.name: t for t in file_tools(policy(ws, autonomy="read_only"))}[name]
    same(*await refusals(tool, arguments))


def test_a_pre_flight_changes_nothing_and_lets_through_what_the_run_accepts(ws: Path) -> None:
    tools = {t.name: t for t in file_tools(policy(ws))}
    before = sorted(str(p.relative_to(ws)) for p in ws.rglob("*"))
    for name, arguments in [("file_write", {"path": "new/deep/file.txt", "content": "x"}),
                            ("file_edit", {"path": "plain.txt", "old": "plain", "new": "x"}),
                            ("file_read", {"path": "plain.txt"})]:
        check = tools[name].preflight
        assert check is not None
        check(**tools[name].validate_arguments(arguments))
    assert sorted(str(p.relative_to(ws)) for p in ws.rglob("*")) == before
    assert (ws / "plain.txt").read_text() == "plain\n"


GIT = [("status", ["--output=/tmp/x"]), ("diff", ["--ext-diff"]), ("log", ["-c", "x=y"]),
       ("add", ["--chmod=+x", "notes.txt"])]


@pytest.mark.parametrize(("operation", "args"), GIT)
async def test_git_refuses_in_pre_flight_as_it_refuses_when_run(
        ws: Path, operation: str, args: list[str]) -> None:
    tool = git_tool(policy(ws), sandbox=BubblewrapSandbox())
    same(*await refusals(tool, {"operation": operation, "args": args}))


async def test_git_refuses_a_repository_outside_and_read_only_writes_the_same_way(
        ws: Path) -> None:
    read_only = git_tool(policy(ws, autonomy="read_only"), sandbox=BubblewrapSandbox())
    same(*await refusals(read_only, {"operation": "commit", "args": ["-m", "x"]}))
    (ws / ".git" / "commondir").write_text("/elsewhere/.git\n")
    same(*await refusals(git_tool(policy(ws), sandbox=BubblewrapSandbox()),
                         {"operation": "status"}))
    same(*await refusals(git_tool(policy(ws), sandbox=UnconfinedSandbox()),
                         {"operation": "status"}))


URLS = ["file:///etc/passwd", "http://user:secret@example.com/", "http://127.0.0.1:9/",
        "http://169.254.169.254/latest/meta-data/", "http://[::ffff:10.0.0.1]/",
        "http://intranet.example/", "not a url"]


@pytest.mark.parametrize("url", URLS)
async def test_the_web_tools_refuse_in_pre_flight_as_they_refuse_when_run(
        ws: Path, url: str) -> None:
    rules = policy(ws, hosts={"intranet.example": "10.0.0.5"})
    fetch, request = http_tools(rules, timeout_s=10)
    tools = [fetch, request, text_browser_tool(rules, timeout_s=10),
             *browser_tools(rules, timeout_s=10)]
    for tool in tools:
        arguments: dict[str, object] = {"url": url}
        if tool.name == "http_request":
            arguments["method"] = "GET"
        same(*await refusals(tool, arguments))


async def test_an_allowlist_and_a_method_are_refused_in_pre_flight_too(ws: Path) -> None:
    fetch, request = http_tools(policy(ws, allowed_domains=("example.com",)), timeout_s=10)
    same(*await refusals(fetch, {"url": "https://example.com.evil.test/"}))
    same(*await refusals(request, {"method": "TRACE", "url": "https://example.com/"}))


async def test_code_mode_without_a_sandbox_refuses_in_pre_flight_as_when_run(ws: Path) -> None:
    chain = ToolChainTool(ToolInvoker([]), sandbox=UnconfinedSandbox())
    same(*await refusals(chain, {"code": "result = 1"}))
    assert host_warnings([chain]) == [
        "tool 'tool_chain' can never run here: code mode needs an OS sandbox (bubblewrap or "
        "Landlock); none is available here, and a script never runs in the host process"]


def test_a_tool_that_can_never_run_here_is_one_warning_line(ws: Path) -> None:
    shell = shell_tool(policy(ws), sandbox=UnconfinedSandbox())
    git = git_tool(policy(ws), sandbox=UnconfinedSandbox())
    read_only = shell_tool(policy(ws, autonomy="read_only"), sandbox=BubblewrapSandbox())
    assert host_warnings([shell, git, read_only, *file_tools(policy(ws))]) == [
        "tool 'shell' can never run here: the chosen sandbox does not confine commands. Fix "
        "that, or set security.allow_unconfined = true (every call then needs approval)",
        "tool 'git_operations' can never run here: git runs only in the sandbox: the chosen "
        "sandbox does not confine commands",
        "tool 'shell' can never run here: security.autonomy is 'read_only'; set it to "
        "'supervised' or 'full'"]


def test_a_users_tool_may_say_why_it_can_never_run(ws: Path) -> None:
    def check(**arguments: object) -> None:
        return None

    tool = Tool.from_function(_ticket, preflight=Preflight(
        check, blocked=lambda: "needs TICKETS_URL; set it in the environment"))
    assert host_warnings([tool]) == [
        "tool '_ticket' can never run here: needs TICKETS_URL; set it in the environment"]


def _ticket(title: str) -> str:
    return title


@pytest.mark.skipif(os.geteuid() != 0, reason="commands run as another uid only as root")
def test_as_root_a_workspace_the_sandbox_uid_cannot_reach_is_named(reachable: Path) -> None:
    private = reachable / "private"
    (private / "ws" / "src").mkdir(parents=True)
    private.chmod(0o700)
    blocked = shell_tool(policy(private / "ws"), sandbox=BubblewrapSandbox())
    owned = reachable / "owned"
    (owned / "src").mkdir(parents=True)  # root's, as the file tools would make it
    runs = shell_tool(policy(owned), sandbox=BubblewrapSandbox())
    assert host_warnings([blocked, runs]) == [
        f"tool 'shell' can never run here: commands run as uid {UNPRIVILEGED_UID} because "
        f"toolkeeper runs as root, and {private} is not reachable by it; run toolkeeper as a "
        "non-root user, or make the workspace's parents searchable (chmod o+x). Fix that, or "
        "set security.allow_unconfined = true (every call then needs approval)",
        f"tool 'shell' runs, but its commands run as uid {UNPRIVILEGED_UID} because "
        "toolkeeper runs as root, so they cannot change files and folders of the workspace "
        "that belong to root (those the file tools write; now src/); run toolkeeper as a "
        f"non-root user, or chown -R {UNPRIVILEGED_UID} {owned}"]

