"""Benchmark: how long ``toolkeeper serve`` takes to stop, in each state, beside the SDK's own
server run by uvicorn with its defaults.

States: idle; a call waiting for a person (``--approval-wait 50``); a call running (a tool that
sleeps 600 s); and, over ``--stdio``, a call waiting for a person while the client keeps its pipe
open. For each, SIGTERM or SIGINT is sent once the state is reached (seen, not guessed: the
request stored, the tool's start file written) and two times are taken from the signal: until
the waiting client has its answer, and until the process has exited. The peer is the official
SDK's low-level ``Server`` offering the same sleeping tool over its stateless Streamable HTTP
app under ``uvicorn.run`` (its defaults: no limit on the graceful shutdown). A process still
alive ``--bound`` seconds after the signal is killed and reported as ``> bound``.

    python benchmarks/bench_stop.py [--rounds 3] [--bound 15]
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

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
PEER = '''
import sys
from pathlib import Path

import anyio
import mcp_types as types
import uvicorn
from mcp.server.lowlevel.server import Server

tool = types.Tool(name="linger", description="Wait.", input_schema={"type": "object"})


async def list_tools(_ctx, _params):
    return types.ListToolsResult(tools=[tool])


async def call_tool(_ctx, params):
    Path(params.arguments["mark"]).write_text("started")
    await anyio.sleep(params.arguments["seconds"])
    return types.CallToolResult(content=[types.TextContent(text="lingered")])


app = Server("peer", on_list_tools=list_tools, on_call_tool=call_tool).streamable_http_app(
    stateless_http=True, json_response=True)
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
'''
ACCEPT = {"Accept": "application/json, text/event-stream"}


def _until(condition: Any, within_s: float = 60.0) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError("the state was not reached")
        time.sleep(0.01)


def _pending(state: Path) -> bool:
    try:
        with sqlite3.connect(state / "toolkeeper.db") as db:
            return bool(db.execute("SELECT 1 FROM approvals WHERE state = 'pending'").fetchone())
    except sqlite3.Error:
        return False


def _start_serve(work: Path, stdio: bool) -> tuple[subprocess.Popen[bytes], str]:
    (work / "tools.py").write_text(TOOLS)
    env = {**os.environ, "TOOLKEEPER_TOKEN": "bench-stop-operator-token-0123456789"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkeeper.cli", "serve", str(work / "tools.py"), "--no-builtins",
         "--port", "0", "--state-dir", str(work / "state"), "--approval-wait", "50",
         "--auth", "none", *(["--stdio"] if stdio else [])],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=work)
    if stdio:
        return proc, ""
    select.select([proc.stdout], [], [], 60)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().decode().split()[3]


def _start_peer(work: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (work / "peer.py").write_text(PEER)
    proc = subprocess.Popen([sys.executable, str(work / "peer.py"), str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    _until(lambda: _answers(url))
    return proc, url


def _answers(url: str) -> bool:
    host, port = url.removeprefix("http://").split(":")
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError:
        return False
    return True


def _post(url: str, name: str, arguments: dict[str, Any], answered: list[float]) -> None:
    try:
        httpx.post(url + "/mcp", headers=ACCEPT, timeout=120, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}})
    except httpx.HTTPError:
        pass  # no answer: the time is not recorded
    else:
        answered.append(time.monotonic())


def _stdio_call(proc: subprocess.Popen[bytes], answered: list[float]) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    for message in ({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
             "params": {"name": "launch", "arguments": {"target": "moon"}}}):
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
    for line in proc.stdout:
        if json.loads(line).get("id") == 1:
            answered.append(time.monotonic())
            return


def one(server: str, state: str, sig: int, bound: float) -> tuple[float | None, float | None]:
    """(seconds from the signal to the waiting client's answer, to the process's exit)."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        stdio = state == "waiting (stdio)"
        proc, url = _start_peer(work) if server == "peer" else _start_serve(work, stdio)
        answered: list[float] = []
        mark = work / "started"
        caller = None
        if state == "running":
            caller = threading.Thread(target=_post, args=(url, "linger", {
                "seconds": 600, "mark": str(mark)}, answered))
        elif state == "waiting":
            caller = threading.Thread(target=_post, args=(url, "launch", {"target": "moon"},
                                                          answered))
        elif stdio:
            caller = threading.Thread(target=_stdio_call, args=(proc, answered))
        if caller is not None:
            caller.start()
            _until(mark.exists if state == "running" else lambda: _pending(work / "state"))
        sent = time.monotonic()
        proc.send_signal(sig)
        try:
            proc.wait(timeout=bound)
            ended: float | None = time.monotonic() - sent
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            ended = None
        if caller is not None:
            caller.join(timeout=5)
        return (answered[0] - sent if answered else None), ended


def _shown(values: list[float | None], *, missing: str) -> str:
    """The median, or ``missing`` when most runs had no value (``*``: some had none)."""
    got = [v for v in values if v is not None]
    if len(got) <= len(values) // 2:
        return missing
    return f"{statistics.median(got):.2f} s" + ("*" if len(got) < len(values) else "")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bound", type=float, default=15.0)
    args = parser.parse_args()
    cases = [(server, state, sig) for sig in (signal.SIGTERM, signal.SIGINT)
             for server, state in (("serve", "idle"), ("serve", "waiting"), ("serve", "running"),
                                   ("serve", "waiting (stdio)"), ("peer", "idle"),
                                   ("peer", "running"))]
    results: dict[tuple[str, str, int], list[tuple[float | None, float | None]]] = {}
    for _ in range(args.rounds):  # interleaved: each round runs every case once
        for case in cases:
            results.setdefault(case, []).append(one(*case, bound=args.bound))
    print("| server | state | signal | waiting client answered | process ended |")
    print("|---|---|---|---:|---:|")
    for (server, state, sig), runs in results.items():
        answer = "—" if state == "idle" else _shown([a for a, _ in runs], missing="none")
        ended = _shown([e for _, e in runs], missing=f"> {args.bound:g} s (killed)")
        name = "toolkeeper serve" if server == "serve" else "SDK Server + uvicorn defaults"
        print(f"| {name} | {state} | {signal.Signals(sig).name} | {answer} | {ended} |")


if __name__ == "__main__":
    main()
