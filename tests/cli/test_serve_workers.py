"""``toolkeeper serve --workers 2`` as a real process: two workers on one port behind the
supervisor the operator started, sharing one SQLite store.

Calls land on both workers (each answer names its worker in the ``toolkeeper-worker`` header)
and each leaves its one audit row; a call waiting for a person in one worker is approved through
either worker's API and runs once; the rate limit counts a client across the workers; SIGTERM
and SIGINT stop every worker within the bound, leaving no process behind; a worker that dies is
reported in one line and stops the server. A connection stays on the worker that accepted it,
so a test reaches a given worker by opening connections until one lands there.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolkeeper.cli.serve_settings import serve_settings
from toolkeeper.errors import ConfigError

from ..server.test_serve import CLIENT_TOKENS, TOKEN, _start
from .command import toolkeeper
from .test_serve_lifecycle import STOP_BOUND_S, _ended, _until

TOOLS = '''
from pathlib import Path

from toolkeeper import ToolRisk, tool

MARKS = Path(__file__).with_name("marks")


@tool
def ping(n: int) -> int:
    """Answer n."""
    return n


@tool(risk=ToolRisk.CRITICAL)
def launch(n: int) -> str:
    """Launch run n: a person decides."""
    with MARKS.open("a") as marks:
        marks.write(f"launch {n}\\n")
    return f"launched {n}"
'''
WORKER = "toolkeeper-worker"
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


class Served:
    """A started ``serve --workers 2``: its process, URL, state dir and workers' pids."""

    def __init__(self, proc: subprocess.Popen[str], url: str, state: Path) -> None:
        self.proc, self.url, self.state = proc, url, state
        self.pids = _worker_pids(proc)

    def client(self, *, worker: int, operator: bool = False) -> httpx.Client:
        """A kept-alive connection that landed on ``worker`` (new connections until one
        does: the kernel spreads them)."""
        token = TOKEN if operator else CLIENT_TOKENS[self.url]
        seen = []
        for _ in range(200):
            client = httpx.Client(base_url=self.url, timeout=60)
            seen.append(client.get("/healthz").headers[WORKER])  # no credential: not counted
            if seen[-1] == str(worker):
                client.headers["Authorization"] = f"Bearer {token}"
                return client
            client.close()
        pytest.fail(f"no connection of 200 landed on worker {worker}: {sorted(set(seen))}")


def _worker_pids(proc: subprocess.Popen[str]) -> list[int]:
    """The pids the supervisor's ``workers:`` start line names (after the first line)."""
    assert proc.stdout is not None
    for _ in range(20):
        line = proc.stdout.readline()
        if line.startswith("workers: "):
            listed = line.split("(pids ")[1].split(")")[0]
            return [int(pid) for pid in listed.split(", ")]
    pytest.fail("no 'workers:' start line")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    (tmp_path / "tools.py").write_text(TOOLS)
    proc, url = _start(tmp_path, "--workers", "2", "--approval-wait", "30",
                       tools=str(tmp_path / "tools.py"))
    yield Served(proc, url, tmp_path / "state")
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def _call(client: httpx.Client, tool: str, arguments: dict[str, object]) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}
    return client.post("/mcp", json=body, headers=MCP_HEADERS)


def _result(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC result of a ``tools/call`` answered as JSON or as an event stream."""
    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("application/json"):
        return dict(response.json()["result"])
    for line in response.text.splitlines():
        if line.startswith("data:") and '"result"' in line:
            return dict(json.loads(line[5:])["result"])
    pytest.fail(f"no result in {response.text!r}")


def _audit(state: Path, tool: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(state / "toolkeeper.db") as db:
        return db.execute("SELECT status, approval_id FROM audit WHERE tool = ?",
                          (tool,)).fetchall()


def test_calls_land_on_both_workers_and_each_leaves_its_one_audit_row(served: Served) -> None:
    answered: dict[str, int] = {}
    for n in range(40):
        with httpx.Client(base_url=served.url, timeout=60, headers={
                "Authorization": f"Bearer {CLIENT_TOKENS[served.url]}"}) as client:
            response = _call(client, "ping", {"n": n})
        assert _result(response)["structuredContent"] == {"result": n}
        answered[response.headers[WORKER]] = answered.get(response.headers[WORKER], 0) + 1
    assert set(answered) == {"1", "2"}, answered
    _until(lambda: len(_audit(served.state, "ping")) == 40, "40 audit rows for 40 calls")
    assert len(set(served.pids)) == 2


@pytest.mark.parametrize("decider", [1, 2], ids=["same-worker", "other-worker"])
def test_a_call_waiting_in_one_worker_is_approved_through_either_and_runs_once(
        served: Served, decider: int) -> None:
    caller = served.client(worker=1)
    answers: list[httpx.Response] = []
    waiting = threading.Thread(target=lambda: answers.append(_call(caller, "launch", {"n": 7})))
    waiting.start()
    operator = served.client(worker=decider, operator=True)
    listed = _until(lambda: operator.get("/api/approvals?state=pending").json()["approvals"],
                    "the call's request stored")
    decided = operator.post(f"/api/approvals/{listed[0]['id']}/decision",
                            json={"decision": "approve"})
    assert decided.status_code == 200 and decided.headers[WORKER] == str(decider), decided.text
    waiting.join(timeout=60)
    (answer,) = answers
    assert answer.headers[WORKER] == "1"
    result = _result(answer)
    assert not result.get("isError") and result["content"][0]["text"] == "launched 7", result
    assert (served.state.parent / "marks").read_text() == "launch 7\n"  # ran once
    assert [status for status, _ in _audit(served.state, "launch")] == ["ok"]
    again = _result(_call(served.client(worker=2), "launch", {"n": 7}))  # not run twice
    assert (served.state.parent / "marks").read_text() == "launch 7\n", again


def test_the_rate_limit_counts_a_client_across_the_workers(tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(TOOLS)
    proc, url = _start(tmp_path, "--workers", "2", "--rate-limit", "1",
                       tools=str(tmp_path / "tools.py"))
    try:
        served = Served(proc, url, tmp_path / "state")
        on = [served.client(worker=1), served.client(worker=2)]
        begun = time.monotonic()
        statuses = [(on[k % 2].get("/api/approvals").status_code, k % 2) for k in range(12)]
        elapsed = time.monotonic() - begun
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    admitted = [k for status, k in statuses if status == 200]
    assert {status for status, _ in statuses} <= {200, 429}, statuses
    # One bucket of 1 request per second (bursts of 2) for the client, wherever it lands:
    # kept in each worker it would admit twice as much.
    assert len(admitted) <= 2 + elapsed * 1.0, (statuses, elapsed)
    assert set(admitted) == {0, 1}  # a full bucket, whichever worker asks first


def test_a_flood_over_both_workers_is_held_to_the_limit_and_refused_429_naming_it(
        tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(TOOLS)
    proc, url = _start(tmp_path, "--workers", "2", "--rate-limit", "40",
                       tools=str(tmp_path / "tools.py"))
    answers: list[httpx.Response] = []
    lock = threading.Lock()
    try:
        served = Served(proc, url, tmp_path / "state")
        on = [served.client(worker=1 + k % 2) for k in range(4)]  # two connections each

        def flood(client: httpx.Client) -> None:
            for _ in range(60):
                answer = client.get("/api/approvals")
                with lock:
                    answers.append(answer)

        begun = time.monotonic()
        threads = [threading.Thread(target=flood, args=(client,)) for client in on]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        elapsed = time.monotonic() - begun
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    statuses = [answer.status_code for answer in answers]
    admitted = statuses.count(200)
    assert len(statuses) == 240 and set(statuses) == {200, 429}, statuses
    # One bucket of 40 requests per second (bursts of 80) for the client, whichever worker
    # holds a batch of its tokens.
    assert admitted <= 80 + 40 * elapsed, (admitted, elapsed)
    refused = next(answer for answer in answers if answer.status_code == 429)
    assert refused.json()["error"] == "rate_limited" and refused.headers["retry-after"] == "1"
    assert "more than 40 requests per second (bursts of 80)" in refused.json()["message"]
    assert "toolkeeper serve --rate-limit N (0 turns it off)" in refused.json()["message"]


def _supervisor_stops(served: Served, sig: int) -> str:
    err = _ended(served.proc, sig)
    for pid in served.pids:
        _until(partial(_gone, pid), f"worker pid {pid} ended", within_s=STOP_BOUND_S)
    return err


def _gone(pid: int) -> bool:
    """The process has ended (a zombie waiting to be reaped has ended too)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_stops_every_worker_within_the_bound_and_answers_a_waiting_call(
        served: Served, sig: int) -> None:
    caller = served.client(worker=2)
    answers: list[httpx.Response] = []
    waiting = threading.Thread(target=lambda: answers.append(_call(caller, "launch", {"n": 1})))
    waiting.start()
    _until(lambda: _audit(served.state, "launch") or _pending_stored(served.state),
           "the call waiting for a person")
    served.proc.send_signal(sig)
    _supervisor_stops(served, sig)
    waiting.join(timeout=STOP_BOUND_S)
    (answer,) = answers
    text = _result(answer)["content"][0]["text"]  # answered 'pending': it stays stored
    assert "is waiting for approval" in text and "Nothing ran yet" in text, text
    assert not (served.state / "server.json").exists()


def _pending_stored(state: Path) -> bool:
    with sqlite3.connect(state / "toolkeeper.db") as db:
        return bool(db.execute("SELECT 1 FROM approvals WHERE state = 'pending'").fetchone())


HOLD = "TOOLKEEPER_TEST_HOLD_WORKER"
SITECUSTOMIZE = f'''
import os, sys, time
from pathlib import Path

if "toolkeeper.cli.serve_worker" in sys.orig_argv and os.environ.get("{HOLD}"):
    marks = Path(os.environ["{HOLD}"])
    if not (marks / "first").exists():  # the first worker starts as usual (alone)
        (marks / "first").touch()
    else:  # the next is held in its interpreter's start
        (marks / f"held-{{os.getpid()}}").touch()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until a signal ends it
            time.sleep(0.05)
'''
"""A ``sitecustomize`` (the test's own, on the workers' path) that holds the second worker of
``serve --workers 2`` inside Python's start — before toolkeeper is imported, so before any of
its handlers — where the supervisor's stop meets Python's default handlers."""


def test_a_stop_while_a_worker_is_still_starting_python_ends_it_without_a_traceback(
        tmp_path: Path) -> None:
    site, marks, workspace = tmp_path / "site", tmp_path / "marks", tmp_path / "workspace"
    for folder in (site, marks, workspace):
        folder.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    path = [str(site), *filter(None, [_absolute_path()])]
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkeeper.cli", "serve", "--workers", "2", "--port", "0",
         "--no-builtins", "--state-dir", str(tmp_path / "state")], cwd=workspace,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(path), HOLD: str(marks)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        (held,) = _until(lambda: list(marks.glob("held-*")), "worker 2 held while starting",
                         within_s=60)
        proc.send_signal(signal.SIGINT)  # Ctrl-C: the supervisor stops the held worker too
        err = _ended(proc, signal.SIGINT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert "Fatal Python error" not in err and "KeyboardInterrupt" not in err, err
    _until(partial(_gone, int(held.name.removeprefix("held-"))), "the held worker ended",
           within_s=STOP_BOUND_S)


@pytest.mark.parametrize("handed", [b"", pickle.dumps((["src"], 9, b"settings"))[:9]],
                         ids=["nothing", "cut-short"])
def test_a_worker_whose_hand_off_never_comes_ends_in_one_line(handed: bytes) -> None:
    """Its supervisor ended before handing it its settings (it was stopped or killed while
    starting workers)."""
    done = subprocess.run([sys.executable, "-P", "-m", "toolkeeper.cli.serve_worker"],
                          input=handed, capture_output=True, timeout=120, check=False)
    err = done.stderr.decode()
    assert done.returncode == 1, err
    assert err.splitlines() == ["toolkeeper: a worker is started by toolkeeper serve --workers N "
                                "(no hand-off on its stdin: the supervisor ended first)"], err


def test_a_worker_that_dies_is_reported_in_one_line_and_stops_the_server(
        served: Served) -> None:
    dead = served.pids[1]
    os.kill(dead, signal.SIGKILL)
    try:
        status = served.proc.wait(timeout=STOP_BOUND_S)
    except subprocess.TimeoutExpired:
        pytest.fail("the supervisor kept serving after a worker died")
    assert served.proc.stderr is not None
    err = served.proc.stderr.read()
    assert status == 1, err
    assert f"worker 2 (pid {dead}) ended (killed by SIGKILL) while serving" in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    _until(partial(_gone, served.pids[0]), "worker 1 stopped too", within_s=STOP_BOUND_S)


@pytest.mark.parametrize(("args", "says"), [
    (["--stdio"], "over --stdio one client owns one process: drop --workers"),
    (["--metrics-port", "0"], "with --workers N read /metrics on the main port"),
    (["--sessions", "--tool-search"], "serve it with --workers 1"),
    (["--artifacts", "results"], "--workers N sends large results whole"),
])
def test_what_several_workers_cannot_share_is_refused_in_one_line(
        tmp_path: Path, args: list[str], says: str) -> None:
    done = toolkeeper("serve", "--no-builtins", "--state-dir", str(tmp_path / "s"),
                      "--workers", "2", *args, cwd=tmp_path, columns=400)
    assert done.returncode == 2 and says in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_auto_over_stdio_is_one_process_on_any_machine_and_a_number_above_one_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A desktop client's configuration written with ``--workers auto`` starts wherever it is
    copied: over stdio ``auto`` is one process, however many cores the machine has."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(8)))
    where = {"state_dir": tmp_path / "state", "workspace": tmp_path}
    assert serve_settings({**where, "stdio": True, "workers": "auto"}).flags.workers == 1
    assert serve_settings({**where, "workers": "auto"}).flags.workers == 8  # over HTTP: 8 cores
    with pytest.raises(ConfigError, match="over --stdio one client owns one process: drop "
                                          "--workers"):
        serve_settings({**where, "stdio": True, "workers": "2"})


def test_auto_is_one_process_where_a_flag_or_the_config_needs_one_on_any_machine(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--workers auto`` with what one process only can serve started on one core and was
    refused on more: it is one process wherever it runs, and a number above one is still
    refused, naming the flag."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(8)))
    where = {"state_dir": tmp_path / "state", "workspace": tmp_path}
    for alone in ({"metrics_port": 0}, {"keep_sessions": True, "tool_search": True},
                  {"artifacts": str(tmp_path / "results")}):
        assert serve_settings({**where, **alone, "workers": "auto"}).flags.workers == 1, alone
        with pytest.raises(ConfigError):
            serve_settings({**where, **alone, "workers": "2"})
    for shared in ({"artifacts": "off"}, {"artifacts": "postgresql://db/x"}):
        assert serve_settings({**where, **shared, "workers": "auto"}).flags.workers == 8
    config = tmp_path / "toolkeeper.toml"
    for server in ("tool_search = true\n", f"artifact_dir = {str(tmp_path / 'a')!r}\n"):
        config.write_text("[server]\n" + server)
        merged = serve_settings({**where, "config": config, "keep_sessions": True,
                                 "workers": "auto"})
        assert merged.flags.workers == 1, server
    config.write_text("")
    assert serve_settings({**where, "config": config, "workers": "auto"}).flags.workers == 8


def test_serve_stdio_with_workers_auto_answers_its_client(tmp_path: Path) -> None:
    """The real command, on this machine's cores (more than one refused it before)."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"}}}
    done = subprocess.run(
        [sys.executable, "-m", "toolkeeper.cli", "serve", "--stdio", "--workers", "auto",
         "--no-builtins", "--state-dir", str(tmp_path / "state")],
        input=json.dumps(init) + "\n", capture_output=True, text=True, timeout=120,
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": _absolute_path()}, check=False)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.splitlines()[0])
    assert answer["id"] == 1 and "serverInfo" in answer["result"], done.stdout


def test_the_help_says_what_several_workers_share_and_what_they_cannot() -> None:
    done = toolkeeper("serve", "--help", columns=1000)
    said = " ".join(done.stdout.split())
    assert done.returncode == 0, done.stderr
    assert "replicas cannot share" not in said
    assert "a session is every worker's and every replica's on the store" in said
    assert "one process only (--workers 1: the loaded tools are kept in its memory)" in said
    assert ("'auto' for one per core (one with --stdio, --tool-search, --metrics-port or "
            "--artifacts DIR, which need one process)") in said


def _absolute_path() -> str:
    """The tests' ``PYTHONPATH`` with every entry absolute, for a child started elsewhere."""
    return os.pathsep.join(os.path.abspath(entry) for entry in
                           os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry)


@pytest.mark.parametrize("given", ["0", "many"])
def test_a_wrong_number_of_workers_is_refused_naming_what_it_must_be(
        tmp_path: Path, given: str) -> None:
    done = toolkeeper("serve", "--no-builtins", "--state-dir", str(tmp_path / "s"),
                      "--workers", given, cwd=tmp_path, columns=400)
    assert done.returncode == 2, done.stderr
    assert "--workers must be a number of processes from 1 to 1024, or 'auto'" in done.stderr


def test_workers_whose_supervisor_is_killed_stop_instead_of_serving_on(served: Served) -> None:
    os.kill(served.proc.pid, signal.SIGKILL)
    served.proc.wait(timeout=STOP_BOUND_S)
    for pid in served.pids:
        _until(partial(_gone, pid), f"worker pid {pid} stopped once its supervisor died",
               within_s=STOP_BOUND_S)


def test_what_the_start_tells_the_operator_is_said_once_not_once_per_worker(
        tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(TOOLS)
    (tmp_path / "toolkeeper.toml").write_text(
        '[mcp]\nenabled = false\n\n[[mcp.servers]]\nname = "notes"\ncommand = "python3"\n'
        'args = ["notes_server.py"]\n')
    proc, url = _start(tmp_path, "--workers", "2", "--config", str(tmp_path / "toolkeeper.toml"),
                       tools=str(tmp_path / "tools.py"))
    Served(proc, url, tmp_path / "state")
    proc.send_signal(signal.SIGTERM)
    err = _ended(proc, signal.SIGTERM)
    assert err.count("1 MCP server(s) configured but not served") == 1, err


def test_on_postgresql_a_call_waiting_in_one_worker_is_approved_through_another_once(
        tmp_path: Path, postgres_url: str) -> None:
    (tmp_path / "tools.py").write_text(TOOLS)
    proc, url = _start(tmp_path, "--workers", "2", "--approval-wait", "30", "--store",
                       postgres_url, tools=str(tmp_path / "tools.py"))
    served = Served(proc, url, tmp_path / "state")
    try:
        caller = served.client(worker=1)
        answers: list[httpx.Response] = []
        waiting = threading.Thread(target=lambda: answers.append(_call(caller, "launch",
                                                                       {"n": 3})))
        waiting.start()
        operator = served.client(worker=2, operator=True)
        listed = _until(lambda: operator.get("/api/approvals?state=pending").json()[
            "approvals"], "the call's request stored")
        operator.post(f"/api/approvals/{listed[0]['id']}/decision",
                      json={"decision": "approve"}).raise_for_status()
        waiting.join(timeout=60)
        (answer,) = answers
        assert _result(answer)["content"][0]["text"] == "launched 3"
        assert (tmp_path / "marks").read_text() == "launch 3\n"
    finally:
        proc.send_signal(signal.SIGTERM)
        _ended(proc, signal.SIGTERM)


def test_a_session_opened_on_one_worker_is_carried_on_by_the_other(tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(TOOLS)
    proc, url = _start(tmp_path, "--workers", "2", "--sessions", tools=str(tmp_path / "tools.py"))
    served = Served(proc, url, tmp_path / "state")
    headers = {**MCP_HEADERS, "MCP-Protocol-Version": "2025-11-25"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"}}}
    try:
        one, two = served.client(worker=1), served.client(worker=2)
        try:
            opened = one.post("/mcp", json=init, headers=headers)
            assert opened.status_code == 200 and opened.headers[WORKER] == "1", opened.text
            session = {**headers, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
            told = two.post("/mcp", headers=session, json={
                "jsonrpc": "2.0", "method": "notifications/initialized"})
            assert told.status_code == 202, told.text
            called = two.post("/mcp", headers=session, json={
                "jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "ping", "arguments": {"n": 7}}})
            assert called.headers[WORKER] == "2"
            assert _result(called)["structuredContent"] == {"result": 7}
        finally:
            one.close()
            two.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
