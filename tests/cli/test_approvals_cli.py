"""``toolkeeper approvals``: ids shown whole at any width and taken as unique prefixes, against
a real SQLite approval store."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolkeeper.approval.models import ApprovalDecision, ApprovalRequest, args_digest
from toolkeeper.approval.store import SqliteApprovalStore
from toolkeeper.cli.main import app
from toolkeeper.core.risk import ToolRisk
from toolkeeper.server.auth import WebSessions

from .command import toolkeeper

runner = CliRunner()
FIRST = "apr_AbCdEfGh1jKlMnOpQrStUv"
SECOND = "apr_AbCdZZZZ1jKlMnOpQrStUv"
THIRD = "apr_Xy-_qqqqqqqqqqqqqqqqqq"
LONG = "Z" * 150 + "END"


def stored(state_dir: Path, *ids: str) -> SqliteApprovalStore:
    store = SqliteApprovalStore(state_dir / "toolkeeper.db")
    arguments = {"alert": {"region": "PT-11", "message": "Storm " * 40, "tail": LONG}}
    for n, request_id in enumerate(ids):
        store.create(ApprovalRequest(
            id=request_id, call_id=f"call-{n}", tool="broadcast_alert", risk=ToolRisk.HIGH,
            arguments=arguments, args_digest=args_digest(arguments),
            session_id="client-a-rather-long-client-name"))
    return store


def approvals(state_dir: Path, *args: str, columns: int = 300) -> tuple[int, str, str]:
    result = runner.invoke(app, ["approvals", *args, "--state-dir", str(state_dir)],
                           env={"COLUMNS": str(columns)})
    return result.exit_code, result.stdout, result.stderr


def one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


def test_list_at_80_columns_shows_every_id_whole_on_one_line(tmp_path: Path) -> None:
    stored(tmp_path, FIRST, SECOND, THIRD)
    code, stdout, _ = approvals(tmp_path, "list", columns=80)
    assert code == 0
    lines = stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    for request_id in (FIRST, SECOND, THIRD):
        assert any(request_id in line for line in lines), stdout
    assert "PT-11" in stdout and "3 pending request(s)" in stdout


def test_list_shows_every_byte_of_long_arguments_at_80_columns(tmp_path: Path) -> None:
    stored(tmp_path, FIRST)
    _, stdout, _ = approvals(tmp_path, "list", columns=80)
    joined = "".join(stdout.split())  # folded across lines, never cut with an ellipsis
    assert joined.count("Storm") == 40 and LONG in joined and "…" not in stdout


@pytest.mark.parametrize("given", ["AbCdE", "apr_AbCdE", FIRST])
def test_show_takes_the_id_or_a_unique_prefix_with_or_without_apr(
        tmp_path: Path, given: str) -> None:
    stored(tmp_path, FIRST, SECOND)
    code, stdout, stderr = approvals(tmp_path, "show", given)
    assert code == 0, stderr
    assert f'"id": "{FIRST}"' in stdout


@pytest.mark.parametrize(("args", "state"), [
    (["approve", "AbCdZ"], "approved"),
    (["deny", "apr_AbCdZ"], "denied"),
    (["decide", "AbCdZZ", "approve"], "approved"),
])
def test_approve_deny_and_decide_take_a_unique_prefix(
        tmp_path: Path, args: list[str], state: str) -> None:
    store = stored(tmp_path, FIRST, SECOND)
    code, stdout, stderr = approvals(tmp_path, *args)
    assert code == 0, stderr
    assert f"{SECOND}: {state}" in stdout
    decided = store.get(SECOND)
    assert decided is not None and decided.state == state
    untouched = store.get(FIRST)
    assert untouched is not None and untouched.state == "pending"


@pytest.mark.parametrize("command", [["show"], ["approve"], ["deny"]])
def test_an_ambiguous_prefix_is_one_line_listing_the_candidates(
        tmp_path: Path, command: list[str]) -> None:
    store = stored(tmp_path, FIRST, SECOND, THIRD)
    code, _, stderr = approvals(tmp_path, *command, "AbCd")
    assert code == 2
    line = one_error_line(stderr)
    assert "ambiguous" in line and FIRST in line and SECOND in line and THIRD not in line
    assert "type more characters" in line
    assert [s.state for s in store.requests()] == ["pending"] * 3


def test_an_ambiguous_prefix_lists_five_candidates_and_counts_the_rest(tmp_path: Path) -> None:
    ids = [f"apr_Same{n:02d}" + "x" * 16 for n in range(8)]
    stored(tmp_path, *ids)
    code, _, stderr = approvals(tmp_path, "show", "Same")
    line = one_error_line(stderr)
    assert code == 2 and "(8 in all)" in line
    assert sum(request_id in line for request_id in ids) == 5


def test_a_prefix_that_matches_nothing_is_one_line_naming_it(tmp_path: Path) -> None:
    stored(tmp_path, FIRST)
    code, _, stderr = approvals(tmp_path, "approve", "nothing-like-it")
    assert code == 2
    assert "no pending approval request 'nothing-like-it'" in one_error_line(stderr)


def test_a_prefix_shorter_than_four_characters_is_refused(tmp_path: Path) -> None:
    store = stored(tmp_path, FIRST)
    code, _, stderr = approvals(tmp_path, "approve", "apr_Ab")
    assert code == 2
    assert "too short" in one_error_line(stderr)
    request = store.get(FIRST)
    assert request is not None and request.state == "pending"


def test_a_prefix_of_a_decided_request_says_it_was_decided(tmp_path: Path) -> None:
    store = stored(tmp_path, FIRST, SECOND)
    store.decide(ApprovalDecision(request_id=SECOND, outcome="denied", approver="page"))
    code, _, stderr = approvals(tmp_path, "approve", "AbCdZ")
    assert code == 2
    line = one_error_line(stderr)
    assert SECOND in line and "denied" in line and "first decision stands" in line


def test_an_unknown_state_is_an_error_naming_the_states(tmp_path: Path) -> None:
    stored(tmp_path, FIRST)
    code, _, stderr = approvals(tmp_path, "list", "--state", "waiting")
    assert code == 2
    line = one_error_line(stderr)
    assert "'waiting'" in line and "pending" in line and "executing" in line


def state_with_server(state_dir: Path, url: str, pid: int) -> WebSessions:
    sessions = WebSessions(state_dir / "toolkeeper.db")
    record = state_dir / "server.json"
    record.write_text(json.dumps({"url": url, "pid": pid, "started_at": time.time()}))
    record.chmod(0o600)
    return sessions


def test_login_url_names_the_running_server_from_its_server_json(tmp_path: Path) -> None:
    sessions = state_with_server(tmp_path, "http://127.0.0.1:45678", os.getpid())
    code, stdout, stderr = approvals(tmp_path, "login-url")
    assert code == 0 and stderr == ""
    link = stdout.strip()
    assert link.startswith("http://127.0.0.1:45678/login?code=")
    assert sessions.redeem(link.rsplit("=", 1)[1]) is not None  # a real, one-time code


def test_login_url_without_a_running_server_prints_the_path_and_says_what_to_pass(
        tmp_path: Path) -> None:
    WebSessions(tmp_path / "toolkeeper.db")
    code, stdout, stderr = approvals(tmp_path, "login-url")
    assert code == 0 and stdout.startswith("/login?code=")
    (note,) = stderr.strip().splitlines()
    assert "unknown" in note and str(tmp_path) in note and "--url http://HOST:PORT" in note


def test_login_url_ignores_the_server_json_of_a_server_that_is_gone(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait(timeout=30)  # reaped: its pid names no process now
    state_with_server(tmp_path, "http://127.0.0.1:45678", gone.pid)
    code, stdout, stderr = approvals(tmp_path, "login-url")
    assert code == 0 and stdout.startswith("/login?code=")
    assert f"pid {gone.pid}" in stderr and "no longer running" in stderr


@pytest.mark.parametrize(("args", "base"), [
    (["--url", "https://tools.example.com/"], "https://tools.example.com/login?code="),
    (["--port", "9911"], "http://127.0.0.1:9911/login?code="),
])
def test_login_url_takes_the_address_given_over_the_recorded_one(
        tmp_path: Path, args: list[str], base: str) -> None:
    state_with_server(tmp_path, "http://127.0.0.1:45678", os.getpid())
    code, stdout, _ = approvals(tmp_path, "login-url", *args)
    assert code == 0 and stdout.startswith(base)


@pytest.mark.parametrize(("args", "message"), [
    (["--url", "127.0.0.1:8765"], "--url must start with http://"),
    (["--url", "http://127.0.0.1:1", "--port", "2"], "not both"),
])
def test_login_url_refuses_a_bad_address_in_one_line(
        tmp_path: Path, args: list[str], message: str) -> None:
    WebSessions(tmp_path / "toolkeeper.db")
    code, _, stderr = approvals(tmp_path, "login-url", *args)
    assert code == 2 and message in one_error_line(stderr)


def test_login_url_honours_the_state_dir_and_the_store_it_is_given(tmp_path: Path) -> None:
    code, _, stderr = approvals(tmp_path / "elsewhere", "login-url", "--port", "9911")
    assert code == 2 and str(tmp_path / "elsewhere") in one_error_line(stderr)
    code, _, stderr = approvals(tmp_path, "login-url", "--store", "sqlite:///x.db")
    assert code == 2 and "--store must be a postgresql:// URL" in one_error_line(stderr)


def test_without_state_dir_list_and_login_url_use_serves_per_user_state_dir(
        tmp_path: Path) -> None:
    state = tmp_path / "xdg" / "toolkeeper"
    state.mkdir(parents=True)
    stored(state, FIRST)
    state_with_server(state, "http://127.0.0.1:45678", os.getpid())
    env = {"COLUMNS": "300", "XDG_STATE_HOME": str(tmp_path / "xdg")}
    listed = runner.invoke(app, ["approvals", "list"], env=env)
    assert listed.exit_code == 0 and FIRST in listed.stdout
    link = runner.invoke(app, ["approvals", "login-url"], env=env)
    assert link.stdout.startswith("http://127.0.0.1:45678/login?code=")


def test_list_at_80_columns_never_breaks_a_fact_across_lines(tmp_path: Path) -> None:
    store = SqliteApprovalStore(tmp_path / "toolkeeper.db")
    arguments = {"region": "PT-11"}
    # a tool name that put "client" at the end of a line and "default" at the start of the next
    store.create(ApprovalRequest(
        id=FIRST, call_id="call-0", tool="broadcast_storm_alert", risk=ToolRisk.HIGH,
        arguments=arguments, args_digest=args_digest(arguments), session_id="client-default"))
    done = toolkeeper("approvals", "list", "--state-dir", str(tmp_path), columns=80)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(map(len, lines)) <= 80
    facts = [fact for line in lines[:2] for fact in line.strip().split("  ")]
    assert facts[:5] == [FIRST, "broadcast_storm_alert", "risk high", "pending",
                         "client default"], done.stdout
    assert facts[5].endswith(" s ago"), done.stdout


def test_list_before_any_serve_says_nothing_waits_yet(tmp_path: Path) -> None:
    done = toolkeeper("approvals", "list", "--state-dir", str(tmp_path / "never-served"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("no approval requests yet: ") and done.stdout.count("\n") == 1
    listed = toolkeeper("approvals", "list", "--json", "--state-dir", str(tmp_path / "x"))
    assert json.loads(listed.stdout) == {"approvals": []}, listed.stdout
