"""``toolkeeper serve`` starts or says in one line why not, and stops when asked (SIGTERM,
SIGINT), whatever it is doing: starting,
idle, a call running, a call waiting for a person — over HTTP and over stdio — within a bound,
without a traceback, and answering every client that is waiting: a call waiting for a person is
answered ``pending`` at once (its request stays stored, for the call made again), a call still
running after a short drain is cancelled and told so.

Every wait here is a bounded wait on something observed (a line printed, a row stored, a file a
tool wrote); ``STOP_BOUND_S`` bounds the stop itself, far above what it takes (the figures are
in docs/benchmarks.md), so that a busy machine does not fail it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from ..processes import readable
from ..server.test_serve import CLIENT_TOKENS, EXAMPLE, _start

pytestmark = pytest.mark.anyio

STOP_BOUND_S = 10.0
SIGNALS = [pytest.param(signal.SIGTERM, id="SIGTERM"), pytest.param(signal.SIGINT, id="SIGINT")]
TOOLS = '''
from pathlib import Path

import anyio

from toolkeeper import HitlMode, ToolRisk, tool


@tool
async def linger(seconds: float, mark: str) -> str:
    """Say it started (a file), then wait."""
    Path(mark).write_text("started")
    await anyio.sleep(seconds)
    return "lingered"


@tool(risk=ToolRisk.CRITICAL, hitl_mode=HitlMode.BLOCKING)
def launch(target: str) -> str:
    """Launch something: a person decides."""
    return f"launched {target}"
'''


def _until(condition: Callable[[], Any], what: str, within_s: float = 30.0) -> Any:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        seen = condition()
        if seen:
            return seen
        time.sleep(0.05)
    pytest.fail(f"not within {within_s:g} s: {what}")


def _ended(proc: subprocess.Popen[str], sig: int) -> str:
    """``proc`` ended within the bound, as a process stopped by ``sig`` does; its stderr, which
    holds no traceback."""
    try:
        proc.wait(timeout=STOP_BOUND_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"serve did not end within {STOP_BOUND_S:g} s of {sig!r}: "
                    f"{proc.communicate(timeout=30)[1][-2000:]}")
    err = _rest(proc)
    assert proc.returncode == (-signal.SIGTERM if sig == signal.SIGTERM else 130), err
    assert "Traceback" not in err, err
    return err


def _rest(proc: subprocess.Popen[str]) -> str:
    """The rest of an ended ``proc``'s stderr, up to its end — which must come within the
    bound: a child of serve still holding the pipe is a process serve left running."""
    assert proc.stderr is not None
    chunks: list[str] = []
    deadline = time.monotonic() + STOP_BOUND_S
    while time.monotonic() < deadline:
        ready = readable([proc.stderr], 0.1)
        if ready:
            chunk = os.read(proc.stderr.fileno(), 65536)
            if not chunk:
                return "".join(chunks)
            chunks.append(chunk.decode(errors="replace"))
    pytest.fail(f"serve ended, but a process it started still holds its stderr: "
                f"{''.join(chunks)[-2000:]}")


def _pending(state: Path) -> list[dict[str, Any]]:
    """The pending requests, as the approvals command lists them."""
    listed = subprocess.run(
        [sys.executable, "-m", "toolkeeper.cli", "approvals", "list", "--json",
         "--state-dir", str(state)], capture_output=True, text=True, timeout=60, check=True)
    return list(json.loads(listed.stdout)["approvals"])


def _stored_pending(state: Path) -> bool:
    db = state / "toolkeeper.db"
    if not db.exists():
        return False
    with sqlite3.connect(db) as connection:
        return bool(connection.execute(
            "SELECT 1 FROM approvals WHERE state = 'pending'").fetchone())


def _http_client(url: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {CLIENT_TOKENS[url]}"},
                              timeout=60)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http))


@pytest.mark.parametrize("sig", SIGNALS)
async def test_a_call_waiting_for_a_person_is_answered_pending_at_once_and_stays_stored(
        tmp_path: Path, sig: int) -> None:
    (tmp_path / "tools.py").write_text(TOOLS)
    proc, url = _start(tmp_path, "--approval-wait", "50", tools=str(tmp_path / "tools.py"))
    answers: list[Any] = []
    try:
        async with _http_client(url) as client, anyio.create_task_group() as group:

            async def call() -> None:
                answers.append(await client.call_tool("launch", {"target": "moon"}))

            group.start_soon(call)
            await anyio.to_thread.run_sync(
                _until, lambda: _stored_pending(tmp_path / "state"), "the request is stored")
            proc.send_signal(sig)
            with anyio.fail_after(STOP_BOUND_S):  # at once, not after the 50 s wait
                while not answers:
                    await anyio.sleep(0.05)
    finally:
        if proc.poll() is None and not answers:
            proc.kill()
    _ended(proc, sig)
    (answer,) = answers
    text = answer.content[0].text
    assert answer.is_error and "is waiting for approval" in text and "Nothing ran yet" in text
    (stored,) = _pending(tmp_path / "state")  # still there, to be decided and taken
    assert stored["tool"] == "launch" and stored["id"] in text
    assert not (tmp_path / "state" / "server.json").exists()


@pytest.mark.parametrize("sig", SIGNALS)
async def test_a_call_still_running_after_the_drain_is_cancelled_and_answered(
        tmp_path: Path, sig: int) -> None:
    (tmp_path / "tools.py").write_text(TOOLS)
    proc, url = _start(tmp_path, tools=str(tmp_path / "tools.py"))
    mark = tmp_path / "started"
    answers: list[Any] = []
    async with _http_client(url) as client, anyio.create_task_group() as group:

        async def call() -> None:
            answers.append(await client.call_tool("linger", {"seconds": 600,
                                                             "mark": str(mark)}))

        group.start_soon(call)
        await anyio.to_thread.run_sync(_until, mark.exists, "the call is running")
        proc.send_signal(sig)
    _ended(proc, sig)
    (answer,) = answers
    assert answer.is_error
    assert "the server stopped before the call of 'linger' finished" in answer.content[0].text
    with sqlite3.connect(tmp_path / "state" / "toolkeeper.db") as db:
        rows = db.execute("SELECT error_code FROM audit WHERE tool = 'linger'").fetchall()
    assert rows == [("cancelled",)]  # recorded as cancelled


@pytest.mark.parametrize("sig", SIGNALS)
async def test_serve_stdio_answers_a_waiting_call_and_ends_while_its_client_holds_the_pipe(
        tmp_path: Path, sig: int) -> None:
    """A desktop client keeps stdin open: the stop neither waits for its next line nor leaves
    its waiting call unanswered."""
    (tmp_path / "tools.py").write_text(TOOLS)
    state = tmp_path / "state"
    launch = StdioServerParameters(
        command=sys.executable, cwd=str(tmp_path),
        args=["-m", "toolkeeper.cli", "serve", "--stdio", str(tmp_path / "tools.py"),
              "--no-builtins", "--state-dir", str(state), "--approval-wait", "50"],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)})
    answers: list[Any] = []
    with (tmp_path / "server.log").open("w") as err:
        async with Client(stdio_client(launch, errlog=err)) as client, \
                anyio.create_task_group() as group:

            async def call() -> None:
                answers.append(await client.call_tool("launch", {"target": "moon"}))

            group.start_soon(call)
            await anyio.to_thread.run_sync(_until, lambda: _stored_pending(state),
                                           "the request is stored")
            pid = json.loads((state / "server.json").read_text())["pid"]
            os.kill(pid, sig)
            with anyio.fail_after(STOP_BOUND_S):
                while not answers:
                    await anyio.sleep(0.05)
            await anyio.to_thread.run_sync(
                _until, lambda: not (state / "server.json").exists(), "serve ended", STOP_BOUND_S)
    log = (tmp_path / "server.log").read_text()
    assert "Traceback" not in log, log
    (answer,) = answers
    assert answer.is_error and "is waiting for approval" in answer.content[0].text
    assert [s["tool"] for s in _pending(state)] == ["launch"]


def _serve(tmp_path: Path, stdio: bool) -> subprocess.Popen[str]:
    (tmp_path / "ws").mkdir(exist_ok=True)
    (tmp_path / "toolkeeper.toml").write_text('[security]\nworkspace = "ws"\n')
    # Without the coverage run's start-up hook: its ``.pth`` line imports coverage under a bare
    # ``except: pass``, so a SIGINT in the process's first instants vanishes there, before
    # Python has read a line of toolkeeper (a Python of a user's has no such hook).
    env = {k: v for k, v in os.environ.items()
           if k not in ("COVERAGE_PROCESS_START", "COVERAGE_PROCESS_CONFIG")}
    env["TOOLKEEPER_TOKEN"] = "stop-test-operator-token-0123456789"
    return subprocess.Popen(
        [sys.executable, "-m", "toolkeeper.cli", "serve", str(EXAMPLE), "--config",
         str(tmp_path / "toolkeeper.toml"), "--port", "0", "--state-dir",
         str(tmp_path / "state"), *(["--stdio"] if stdio else [])],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env, cwd=tmp_path)


def _ready(proc: subprocess.Popen[str], stdio: bool) -> None:
    """Until serve has printed where it serves (stdout; stderr over stdio)."""
    stream = proc.stderr if stdio else proc.stdout
    assert stream is not None
    ready = readable([stream], 90)
    assert ready and stream.readline(), "serve did not start"


COMMAND_FRAME = re.compile(r'File "[^"]*toolkeeper[^"]*", line \d+, in (?!<module>)')


def _quiet(err: str) -> bool:
    """No traceback — or Python's own, from a SIGINT that came while Python was still importing
    the toolkeeper package (runpy's ``_get_module_details`` in the stack, every toolkeeper
    frame a module's top level): no code of the command had run yet to take the signal, and
    what it ends in is Python's (a ``KeyboardInterrupt``, or an extension module that panics
    when it is interrupted while loading). On a busy machine the signal can come earlier
    still, while Python loads ``runpy`` itself ("Could not import runpy module"), or its
    ``site`` module ("Fatal Python error: init_import_site", ending in KeyboardInterrupt)."""
    if "Traceback" not in err or err.startswith("Could not import runpy module"):
        return True
    if err.startswith("Fatal Python error: init_import_site") and \
            err.rstrip().endswith("KeyboardInterrupt"):
        return True
    return "_get_module_details" in err and not COMMAND_FRAME.search(err)


@pytest.mark.parametrize("stdio", [False, True], ids=["http", "stdio"])
@pytest.mark.parametrize("sig", SIGNALS)
def test_a_stop_signal_at_any_moment_of_the_start_ends_serve_quietly(
        tmp_path: Path, sig: int, stdio: bool) -> None:
    """From the process's first instant to just after it says where it serves: the moments a
    signal used to meet Python's, asyncio's or uvicorn's handlers instead of serve's."""
    moments: list[float | str] = [0.0, 0.15, 0.4, 0.8, "ready", "ready+0.01", "ready+0.3"]
    for n, moment in enumerate(moments):
        run = tmp_path / str(n)
        run.mkdir()
        proc = _serve(run, stdio)
        if isinstance(moment, str):
            _ready(proc, stdio)
            time.sleep(float(moment.partition("+")[2] or 0))  # a moment, not a wait for state
        else:
            time.sleep(moment)
        proc.send_signal(sig)
        try:
            _, err = proc.communicate(timeout=STOP_BOUND_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"{moment}: serve did not end within {STOP_BOUND_S:g} s of {sig!r}")
        assert _quiet(err), f"{moment}: {err[-3000:]}"
        if "stopped at once" in err:  # the stop deadline ended a start slowed by the load
            assert proc.returncode == 128 + sig, (moment, proc.returncode, err[-2000:])
        elif "Traceback" not in err:  # serve's own end (not Python's, while it loaded)
            # killed by SIGTERM; after SIGINT 130, or killed by it before Python took it
            assert proc.returncode in ((-sig,) if sig == signal.SIGTERM else (130, -sig)), (
                moment, proc.returncode, err[-2000:])
        if moment != 0.0:
            assert not (run / "state" / "server.json").exists(), moment


def test_an_unexpected_failure_at_start_is_one_line_and_debug_shows_the_traceback(
        tmp_path: Path) -> None:
    """A fault nobody foresaw (here: a return type pydantic has no schema for, found as the
    catalog is exported) reaches the operator as one line, not a hundred."""
    (tmp_path / "tools.py").write_text(
        "import socket\n\nfrom toolkeeper import tool\n\n\n@tool\n"
        "def connect(host: str) -> socket.socket:\n    \"\"\"Open a socket.\"\"\"\n"
        "    return socket.create_connection((host, 80))\n")
    command = [sys.executable, "-m", "toolkeeper.cli", "serve", str(tmp_path / "tools.py"),
               "--no-builtins", "--port", "0", "--state-dir", str(tmp_path / "state")]
    env = {**os.environ, "TOOLKEEPER_TOKEN": "start-test-operator-token-0123456789"}
    plain = subprocess.run(command, capture_output=True, text=True, timeout=90, env=env)
    debug = subprocess.run([*command[:3], "--debug", *command[3:]], capture_output=True,
                           text=True, timeout=90, env=env)
    assert plain.returncode == 2 and plain.stdout == ""
    (line,) = plain.stderr.splitlines()
    assert line.startswith("error: toolkeeper serve stopped on an unexpected error: "
                           "PydanticSchemaGenerationError: Unable to generate")
    assert line.endswith("(--debug shows the traceback)")
    assert debug.returncode == 2 and "Traceback" in debug.stderr


STUBBORN = '''
import os
import signal
import sys
import time

signal.signal(signal.SIGTERM, signal.SIG_IGN)  # and it never reads its stdin's end
with open(sys.argv[1], "w") as pid:
    pid.write(str(os.getpid()))
while True:
    time.sleep(1)
'''


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("sig", SIGNALS)
def test_a_stop_while_an_upstream_connects_ends_the_upstream_too(tmp_path: Path, sig: int) -> None:
    """An upstream MCP server that ignores both the end of its stdin and SIGTERM is killed
    within the stop's bound, never left running after serve."""
    (tmp_path / "stubborn.py").write_text(STUBBORN)
    pid_file = tmp_path / "upstream.pid"
    (tmp_path / "toolkeeper.toml").write_text(
        f'[mcp]\nenabled = true\n[[mcp.servers]]\nname = "stubborn"\nsandbox = false\n'
        f'command = {json.dumps(sys.executable)}\n'
        f'args = {json.dumps([str(tmp_path / "stubborn.py"), str(pid_file)])}\n')
    proc, _url = _start(tmp_path, "--config", str(tmp_path / "toolkeeper.toml"))
    pid = int(_until(lambda: pid_file.exists() and pid_file.read_text(), "the upstream runs"))
    try:
        proc.send_signal(sig)
        err = _ended(proc, sig)
        assert "not stopped" not in err, err  # it ended by itself, not at the deadline
        _until(lambda: not _alive(pid), "the upstream is gone", STOP_BOUND_S)
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
