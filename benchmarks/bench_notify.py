"""Benchmark: from an approval request being made to its notification arriving.

A real ``toolkeeper serve`` process (SQLite state, ``--approval-wait 0``) serves one critical
tool, with ``[approval.notify]`` sending every request to two receivers on loopback: ntfy
(through Apprise) and toolkeeper's signed JSON webhook (httpx), both an HTTP server in this
process that notes when each POST arrives. Official-SDK MCP clients make the calls (each with
new arguments, so each makes a request); a request's latency is its arrival at the receiver
minus its ``created_at`` (the moment the server made it: the webhook's event carries it, and the
ntfy message names the request, whose ``created_at`` the store keeps).

First ``--requests`` requests one at a time (the next once this one was notified on both
channels: each request's latency alone), then a burst of ``--burst`` made by ``--concurrency``
clients as fast as they can (the notifier catching up with a queue).

    python benchmarks/bench_notify.py [--requests 200] [--burst 200] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import re
import select
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import anyio

TOOLS = '''
from toolkeeper import ToolRisk, tool

@tool(risk=ToolRisk.CRITICAL)
def launch(n: int) -> str:
    """Launch run n."""
    return f"launched {n}"
'''
TOKEN = "bench-token-0123456789"
KEY = "bench-signing-key-0123456789"
ARRIVED: dict[str, dict[str, float]] = {"json": {}, "ntfy": {}}
LOCK = threading.Lock()


class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        now = time.time()
        text = body.decode("utf-8", "replace")
        request_id = re.search(r"apr_[A-Za-z0-9_-]{22}", text)
        if request_id is not None:
            with LOCK:
                ARRIVED["json" if self.path == "/hook" else "ntfy"].setdefault(
                    request_id.group(0), now)
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"id": "ok"}')

    def log_message(self, *_args: object) -> None:
        pass


def _serve(work: Path, receiver: str) -> tuple[subprocess.Popen[str], str]:
    (work / "tools.py").write_text(TOOLS)
    (work / "toolkeeper.toml").write_text(
        f'[approval.notify]\nurls = ["ntfy://{receiver}/approvals", "json://{receiver}/hook"]\n')
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkeeper.cli", "serve", str(work / "tools.py"), "--no-builtins",
         "--config", str(work / "toolkeeper.toml"), "--port", "0", "--rate-limit", "0",
         "--state-dir", str(work / "state"), "--approval-wait", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "TOOLKEEPER_TOKEN": TOKEN, "TOOLKEEPER_NOTIFY_KEY": KEY})
    assert proc.stdout is not None
    select.select([proc.stdout], [], [], 60)
    url = proc.stdout.readline().split()[3]
    return proc, url


def _told(request_id: str) -> bool:
    with LOCK:
        return all(request_id in got for got in ARRIVED.values())


async def _calls(url: str, token: str, numbers: list[int], paced: bool) -> None:
    """Calls ``launch`` with each number; ``paced``: the next once this one was notified on
    both channels (each request alone), else at once (a burst)."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
    async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
        for n in numbers:
            answer = await client.call_tool("launch", {"n": n})
            text = answer.content[0].text
            assert answer.is_error and "waiting for approval" in text
            request_id = text.split("(request ")[1].split(")")[0]
            deadline = time.monotonic() + 30
            while paced and not _told(request_id) and time.monotonic() < deadline:
                await anyio.sleep(0.005)


async def _run(url: str, token: str, numbers: range, concurrency: int, paced: bool) -> None:
    async with anyio.create_task_group() as group:
        for worker in range(concurrency):
            group.start_soon(_calls, url, token, list(numbers)[worker::concurrency], paced)


def _created(work: Path) -> dict[str, float]:
    """When each request was made (its ``created_at``)."""
    with sqlite3.connect(work / "state" / "toolkeeper.db") as db:
        rows = db.execute("SELECT id, request FROM approvals").fetchall()
    return {rid: json.loads(raw)["created_at"] for rid, raw in rows}


def _row(name: str, values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    p95 = ms[max(0, round(len(ms) * 0.95) - 1)]
    return f"| {name} | {len(ms)} | {statistics.median(ms):.0f} | {p95:.0f} | {ms[-1]:.0f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--burst", type=int, default=200,
                        help="requests made as fast as the clients can, after the paced ones")
    parser.add_argument("--concurrency", type=int, default=4, help="clients in the burst")
    args = parser.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        proc, url = _serve(work, f"127.0.0.1:{server.server_address[1]}")
        try:
            token = (work / "state" / "client-token").read_text().strip()
            anyio.run(_run, url, token, range(args.requests), 1, True)
            paced = set(_created(work))
            burst = range(args.requests, args.requests + args.burst)
            started = time.monotonic()
            anyio.run(_run, url, token, burst, args.concurrency, False)
            made_in = time.monotonic() - started
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and min(len(a) for a in ARRIVED.values()) < \
                    args.requests + args.burst:
                time.sleep(0.1)
            created = _created(work)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(f"{args.requests} requests one at a time; then a burst of {args.burst} made by "
          f"{args.concurrency} clients in {made_in:.1f} s ({args.burst / made_in:.0f}/s)")
    print("| request made → notification received | requests | p50 ms | p95 ms | max ms |")
    print("|---|---:|---:|---:|---:|")
    for channel, name in (("json", "signed JSON webhook (httpx)"), ("ntfy", "ntfy (Apprise)")):
        got = ARRIVED[channel]
        for label, ids in (("one at a time", paced), ("burst", set(created) - paced)):
            print(_row(f"{name}, {label}", [got[r] - created[r] for r in ids if r in got]))
            missing = len(ids - set(got))
            if missing:
                print(f"  {missing} request(s) never notified on {channel} within 60 s")


if __name__ == "__main__":
    main()
