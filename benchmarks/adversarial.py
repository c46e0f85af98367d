"""Benchmark: the attacks of the hostile-load run, each reproduced (scaled down to seconds) and
measured — against a real ``toolkeeper serve`` where the attack goes through it, against the
library in a process of its own where it does not (the sandbox, the bridge, the test server).

    python benchmarks/adversarial.py [--src DIR] [--only NAME ...]

``--src`` is the ``src`` folder of the toolkeeper to attack (this tree's by default): every
server, run and script of the benchmark imports toolkeeper from it, so the same attacks measure
an older tree too. Prints one line per item: its name and the figure measured. Upstreams are
``tests/gateway/upstream_server.py`` (the MCP SDK alone). As root, the items that need a user of
their own (the sandbox's process limit, the PostgreSQL test server) run as an unprivileged uid.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = str(ROOT / "examples" / "weather.py")
UPSTREAM = str(ROOT / "tests" / "gateway" / "upstream_server.py")
UNPRIVILEGED = 64_997
"""The uid the sandbox item runs as under root (one no other process uses)."""
NOBODY = 65534
"""The uid the PostgreSQL item runs as under root (initdb needs a user that exists)."""
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
           "MCP-Protocol-Version": "2025-11-25"}
SRC = str(ROOT / "src")


@dataclass
class Served:
    proc: subprocess.Popen[str]
    url: str
    state: Path
    started_s: float

    def post(self, body: object, timeout: float = 30.0) -> httpx.Response:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return httpx.post(f"{self.url}/mcp", content=data, headers=HEADERS, timeout=timeout)

    def call(self, name: str, arguments: dict[str, object], timeout: float = 60.0
             ) -> dict[str, object]:
        answer = self.post({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                            "params": {"name": name, "arguments": arguments}}, timeout)
        return _message(answer)

    def peak_kib(self) -> int:
        """The serve process's peak resident memory (VmHWM)."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
        return 0

    def audit_rows(self, where: str = "1=1") -> int:
        with sqlite3.connect(self.state / "toolkeeper.db") as db:
            return int(db.execute(f"SELECT count(*) FROM audit WHERE {where}").fetchone()[0])


def _message(answer: httpx.Response) -> dict[str, object]:
    text = answer.text
    if answer.headers.get("content-type", "").startswith("text/event-stream"):
        datas = [ln[5:].strip() for ln in text.splitlines() if ln.startswith("data:")]
        text = next((d for d in reversed(datas) if '"id"' in d), datas[-1] if datas else "{}")
    loaded: dict[str, object] = json.loads(text or "{}")
    return loaded


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLKEEPER_")}
    env["PYTHONPATH"] = SRC
    env["TOOLKEEPER_TOKEN"] = "adversarial-operator-token-0123456789"
    return env


@contextmanager
def serve(tmp: Path, *, config: str | None = None, tools: str = EXAMPLE,
          wait_s: float = 60.0) -> Iterator[Served | None]:
    """``toolkeeper serve`` (no built-ins, no auth, a rate limit no client here reaches) on a
    free port; None when it
    printed no ready line within ``wait_s``."""
    args = [sys.executable, "-m", "toolkeeper.cli", "serve", tools, "--no-builtins", "--port",
            "0", "--auth", "none", "--rate-limit", "100000", "--approval-wait", "0",
            "--state-dir", str(tmp / "state")]
    if config is not None:
        (tmp / "toolkeeper.toml").write_text(config)
        args += ["--config", str(tmp / "toolkeeper.toml")]
    started = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=_env(), cwd=tmp)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], wait_s)
        line = proc.stdout.readline() if ready else ""
        if not line.startswith("toolkeeper serving on "):
            yield None
        else:
            yield Served(proc, line.split()[3], tmp / "state", time.monotonic() - started)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _upstream(tmp: Path, extra: str = "", codemode: str = "") -> str:
    return (f"{codemode}[mcp]\nenabled = true\n[[mcp.servers]]\nname = \"up\"\n"
            f"command = {json.dumps(sys.executable)}\n"
            f"args = {json.dumps([UPSTREAM, str(tmp)])}\nrisk = \"safe\"\n"
            f"connect_timeout_s = 20\n{extra}")


def _text(message: dict[str, object]) -> str:
    result = message.get("result")
    if isinstance(result, dict):
        return " ".join(str(c.get("text", "")) for c in result.get("content", []))
    return json.dumps(message.get("error"))


def _as_user(command: list[str], uid: int = UNPRIVILEGED) -> list[str]:
    if os.geteuid() != 0:
        return command
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *command]


# -- 1. sandboxes ------------------------------------------------------------------------

SANDBOX_RUNS = """
import asyncio, json, subprocess, sys
from toolkeeper import ToolInvoker, tool
from toolkeeper.codemode import ToolChainTool

@tool
def ping() -> str:
    '''Ping.'''
    return "pong"

# 40 calls waiting for approval: 40 tasks of the server's uid besides its own
waiting = [subprocess.Popen(["sleep", "60"]) for _ in range(int(sys.argv[1]))]
try:
    chain = ToolChainTool(ToolInvoker([ping]))
    runs = [asyncio.run(chain.run_chain("result = ping().text")) for _ in range(3)]
    print(json.dumps([[r.status, r.value, r.output_text[-160:]] for r in runs]))
finally:
    for proc in waiting:
        proc.kill()
"""


def sandbox_nproc(tmp: Path) -> str:
    os.chmod(tmp, 0o777)
    said = []
    for others in (40, 0):  # 0: the control, the same runs with no other task of the uid
        done = subprocess.run(_as_user([sys.executable, "-c", SANDBOX_RUNS, str(others)]),
                              capture_output=True, text=True, timeout=120, cwd=tmp,
                              env={**_env(), "HOME": str(tmp)})
        if done.returncode != 0:
            errors = [ln.strip(" |") for ln in done.stderr.splitlines() if "Error" in ln]
            said.append(f"{others} other tasks: the runs raised {(errors or ['?'])[-1][:80]}")
            continue
        runs = json.loads(done.stdout.strip().splitlines()[-1])
        started = sum(1 for status, value, _ in runs if status == "ok" and value == "pong")
        said.append(f"{others} other tasks: {started}/3 code-mode runs started")
    return "; ".join(said)


# -- 2. records --------------------------------------------------------------------------

CODEMODE = ("[codemode]\nenabled = true\nmax_tool_calls = 50\ntotal_timeout_s = 60\n"
            "tools = [\"get_forecast\"]\n")
FLOOD_S = 5
BUDGET_FLOOD = f"""
import time
end, n = time.time() + {FLOOD_S}, 0
while time.time() < end:
    try:
        get_forecast(city='Lisbon')
    except Exception:
        pass
    n += 1
result = n
"""


def budget_flood(tmp: Path) -> str:
    with serve(tmp, config=CODEMODE) as server:
        assert server is not None
        before = server.peak_kib()
        started = time.monotonic()
        answer = server.call("tool_chain", {"code": BUDGET_FLOOD}, timeout=120)
        took = time.monotonic() - started
        rows = server.audit_rows("tool = 'get_forecast'")
        grown = (server.peak_kib() - before) / 1024
    return (f"{FLOOD_S} s script calling past its 50-call budget: {rows} audit rows, run took "
            f"{took:.1f} s, serve peak memory +{grown:.0f} MiB ({_text(answer)[:60]!r})")


NESTED = """
deep = 'x'
for _ in range(899):
    deep = {'a': deep}
try:
    result = call_tool('get_forecast', {'city': deep}).status
except Exception as exc:
    result = type(exc).__name__
"""


def nesting(tmp: Path) -> str:
    deep: object = "x"
    for _ in range(899):
        deep = {"a": deep}
    with serve(tmp, config=CODEMODE) as server:
        assert server is not None
        started = time.monotonic()
        try:
            answer = server.call("get_forecast", {"city": deep}, timeout=15)
            said = f"answered in {time.monotonic() - started:.2f} s: {_text(answer)[:60]!r}"
        except httpx.TimeoutException:
            said = "no answer within 15 s"
        rows = server.audit_rows()
        run = _text(server.call("tool_chain", {"code": NESTED}, timeout=120))
        script_rows = server.audit_rows("tool = 'get_forecast'") - rows
    return (f"900-level arguments over HTTP: {said}; {rows} audit row(s); from a script: "
            f"{run.splitlines()[-1][:60]!r}, {script_rows} audit row(s)")


SEARCH_FLOOD = f"""
import time
end, n = time.time() + {FLOOD_S}, 0
while time.time() < end:
    try:
        search_tools('forecast')
    except Exception:
        break
    n += 1
result = n
"""


def search_flood(tmp: Path) -> str:
    import threading

    with serve(tmp, config=CODEMODE) as server:
        assert server is not None
        latencies: list[float] = []
        done = threading.Event()

        def other_client() -> None:
            while not done.is_set():
                started = time.monotonic()
                server.call("get_forecast", {"city": "Porto"})
                latencies.append(time.monotonic() - started)
                time.sleep(0.05)

        worker = threading.Thread(target=other_client)
        worker.start()
        answer = server.call("tool_chain", {"code": SEARCH_FLOOD}, timeout=120)
        done.set()
        worker.join()
        recorded = server.audit_rows("tool LIKE '%search%'")
    latencies.sort()
    return (f"another client's call during a {FLOOD_S} s search_tools flood: median "
            f"{latencies[len(latencies) // 2] * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms; "
            f"searches made {_text(answer)[:40]!r}, recorded {recorded}")


FRAME_RUN = """
import asyncio, json
from toolkeeper import ToolInvoker, tool
from toolkeeper.codemode import ToolChainTool

@tool
def get_weather(city: str) -> str:
    '''Weather.'''
    return "sunny in " + city

SCRIPT = '''
first = get_weather(city='A').status
import os, socket, struct, json
for fd in map(int, os.listdir('/proc/self/fd')):
    try:
        sock = socket.socket(fileno=os.dup(fd))
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE)
    except OSError:
        continue
    data = json.dumps({"type": "call", "secret": "s\\\\u00e9cr\\\\u00e8t\\\\ud800",
                       "tool": "get_weather", "arguments": {"city": "B"}}).encode()
    sock.sendall(struct.pack(">I", len(data)) + data)
    break
result = get_weather(city='C').status
'''
try:
    run = asyncio.run(ToolChainTool(ToolInvoker([get_weather])).run_chain(SCRIPT))
    print(json.dumps({"status": run.status, "trace": [c.tool for c in run.call_trace]}))
except Exception as exc:
    print(json.dumps({"raised": type(exc).__name__}))
"""


def frame(tmp: Path) -> str:
    done = subprocess.run([sys.executable, "-c", FRAME_RUN], capture_output=True, text=True,
                          timeout=120, cwd=tmp, env=_env())
    said = json.loads(done.stdout.strip().splitlines()[-1])
    if "raised" in said:
        return f"forged non-ASCII frame: the host side raised {said['raised']}, trace lost"
    return (f"forged non-ASCII frame: run ended '{said['status']}', trace kept "
            f"{len(said['trace'])} call(s)")


# -- 3. upstreams ------------------------------------------------------------------------

def collisions(tmp: Path) -> str:
    import hashlib

    digest = hashlib.sha256(b"up-a b").hexdigest()
    (tmp / "tools.json").write_text(json.dumps([{"name": n} for n in (
        f"a_b_{digest[:8]}", f"a_b_{digest[:16]}", "a b")]))
    with serve(tmp, config=_upstream(tmp)) as server:
        assert server is not None
        deadline, listed, names = time.monotonic() + 30, {}, []
        while time.monotonic() < deadline:
            listed = _message(server.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
            result = listed.get("result")
            names = [str(t["name"]) for t in result.get("tools", [])] \
                if isinstance(result, dict) else []
            if "error" in listed or any(n.startswith("up-") for n in names):
                break
            time.sleep(0.2)
    if "error" in listed:
        return f"3 colliding upstream names: tools/list failed ({_text(listed)[:70]})"
    return (f"3 colliding upstream names: tools/list answered {len(names)} tools "
            f"({sum(n.startswith('up-') for n in names)} of the upstream's)")


def endless(tmp: Path) -> str:
    (tmp / "endless").write_text("0.15")  # a page every 0.15 s (the run's: 2 s, 100 pages)
    started = time.monotonic()
    with serve(tmp, config=_upstream(tmp), wait_s=60) as server:
        if server is None:
            return "endless page chain (0.15 s a page): serve not ready after 60 s"
        answer = server.call("get_forecast", {"city": "Faro"})
        took = time.monotonic() - started
    return (f"endless page chain (0.15 s a page): serve ready in {server.started_s:.1f} s, first local call "
            f"answered {took:.1f} s after launch ({'ok' if 'Faro' in _text(answer) else 'error'})")


def big_result(tmp: Path) -> str:
    (tmp / "tools.json").write_text(json.dumps([{"name": "big"}]))
    with serve(tmp, config=_upstream(tmp, "call_timeout_s = 120\n")) as server:
        assert server is not None
        _wait_listed(server, "up-big")
        before = server.peak_kib()
        started = time.monotonic()
        answer = server.post({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "up-big", "arguments": {"size": 64 * 1024 * 1024}}}, timeout=180)
        took = time.monotonic() - started
        peak = server.peak_kib()
    size = len(answer.content)
    return (f"64 MiB upstream result: serve peak {peak / 1024:.0f} MiB (+{(peak - before) / 1024:.0f}"
            f"), answer {size / 1048576:.1f} MiB in {took:.1f} s")


def offloaded(tmp: Path) -> str:
    """An 8 MiB upstream result (between the inline threshold and the read cap): what serve's
    memory peaks at, and what the client is sent (offloaded: a preview and a link)."""
    (tmp / "tools.json").write_text(json.dumps([{"name": "big"}]))
    with serve(tmp, config=_upstream(tmp, "call_timeout_s = 120\n")) as server:
        assert server is not None
        _wait_listed(server, "up-big")
        before = server.peak_kib()
        answer = server.post({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "up-big", "arguments": {"size": 8 * 1024 * 1024}}}, timeout=180)
        peak = server.peak_kib()
    links = [c for c in json.loads(answer.text or "{}").get("result", {}).get("content", [])
             if c.get("type") == "resource_link"] if answer.headers.get(
                 "content-type", "").startswith("application/json") else []
    return (f"8 MiB upstream result: serve peak {peak / 1024:.0f} MiB (+{(peak - before) / 1024:.0f}"
            f"), answer {len(answer.content) / 1024:.0f} KiB"
            f"{', offloaded to ' + links[0]['uri'][:40] + '…' if links else ', inline'}")


def _wait_listed(server: Served, name: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        listed = _message(server.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        result = listed.get("result")
        if isinstance(result, dict) and name in {t["name"] for t in result.get("tools", [])}:
            return
        time.sleep(0.2)


SHADOW_TOOLS = '''
from toolkeeper import tool

@tool(namespace="up")
def echo(text: str) -> str:
    """Echo, locally."""
    return "local: " + text
'''


def shadowing(tmp: Path) -> str:
    (tmp / "local.py").write_text(SHADOW_TOOLS)
    with serve(tmp, config=_upstream(tmp), tools=str(tmp / "local.py")) as server:
        assert server is not None
        _wait_listed(server, "up-add")
        answer = server.call("up-echo", {"text": "hi"})
    said = _text(answer)
    who = "the local tool" if said.startswith("local:") else "the upstream's tool" \
        if said == "hi" else f"neither ({said[:50]!r})"
    return f"upstream tool named like a local one: a call of 'up-echo' ran {who}"


MANY_TOOLS = '''
import os
from toolkeeper import Tool

def _f(x: int) -> int:
    return x

TOOLS = [Tool.from_function(_f, name=f"tool_{i:05d}", description=f"tool number {i}")
         for i in range(int(os.environ["ADVERSARIAL_TOOLS"]))]
'''


def big_catalog(tmp: Path, size: int) -> str:
    (tmp / "many.py").write_text(MANY_TOOLS)
    os.environ["ADVERSARIAL_TOOLS"] = str(size)
    with serve(tmp, tools=f"{tmp / 'many.py'}:TOOLS", wait_s=120) as server:
        assert server is not None
        started, cursor, count, pages = time.monotonic(), None, 0, 0
        while True:
            params: dict[str, object] = {"cursor": cursor} if cursor else {}
            page = _message(server.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                                         "params": params}, timeout=120))
            result = page["result"]
            assert isinstance(result, dict)
            count += len(result["tools"])
            pages += 1
            cursor = result.get("nextCursor")
            if not cursor:
                break
        took = time.monotonic() - started
    return f"tools/list of {count} tools: every page ({pages}) in {took:.2f} s"


# -- 4. protocol edges -------------------------------------------------------------------

def envelope(tmp: Path) -> str:
    with serve(tmp) as server:
        assert server is not None
        answer = server.post({"jsonrpc": "2.0", "id": 1, "method": 5})
    code = _message(answer).get("error", {})
    return (f"malformed envelope: HTTP {answer.status_code}, code "
            f"{code.get('code') if isinstance(code, dict) else '-'}, {len(answer.content)} bytes")


def invalid_id(tmp: Path) -> str:
    with serve(tmp) as server:
        assert server is not None
        answer = server.post({"jsonrpc": "2.0", "id": {"bad": 1}, "method": "tools/list"})
    if not answer.content:
        return f"invalid id: HTTP {answer.status_code}, no answer (taken for a notification)"
    code = _message(answer).get("error", {})
    return (f"invalid id: HTTP {answer.status_code}, code "
            f"{code.get('code') if isinstance(code, dict) else '-'}, {len(answer.content)} bytes")


PG = """
import time, psycopg
from toolkeeper.testing.postgres import create_database, postgres_server
started = time.monotonic()
with postgres_server() as base:
    url = create_database(base)
    with psycopg.connect(url) as conn:
        print("answer", conn.execute("select 6 * 7").fetchone()[0], time.monotonic() - started)
"""


def postgres(tmp: Path) -> str:
    os.chmod(tmp, 0o777)
    done = subprocess.run(_as_user([sys.executable, "-c", PG], NOBODY), capture_output=True, text=True,
                          timeout=120, cwd="/", env={**_env(), "HOME": str(tmp)})
    if done.returncode != 0 or "answer 42" not in done.stdout:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return f"testing.postgres as a non-root user: failed ({last[:90]})"
    took = float(done.stdout.split()[-1])
    return f"testing.postgres as a non-root user: a server and a database in {took:.1f} s"


ITEMS: dict[str, Callable[[Path], str]] = {
    "1 sandbox nproc": sandbox_nproc,
    "2 budget flood": budget_flood,
    "2 nesting": nesting,
    "2 search flood": search_flood,
    "2 non-ASCII frame": frame,
    "3 colliding names": collisions,
    "3 endless pages": endless,
    "3 64 MiB result": big_result,
    "3 shadowing": shadowing,
    "3 tools/list 10k": lambda tmp: big_catalog(tmp, 10_000),
    "3 upstream 8 MiB": offloaded,
    "3 tools/list 20k": lambda tmp: big_catalog(tmp, 20_000),
    "4 envelope": envelope,
    "4 invalid id": invalid_id,
    "4 testing.postgres": postgres,
}


def main() -> None:
    global SRC
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", default=SRC, help="the src folder of the toolkeeper to attack")
    parser.add_argument("--only", nargs="*", help="item names (a prefix each) to run")
    options = parser.parse_args()
    SRC = str(Path(options.src).resolve())
    for name, item in ITEMS.items():
        if options.only and not any(name.startswith(o) for o in options.only):
            continue
        with tempfile.TemporaryDirectory(prefix="adversarial-") as tmp:
            try:
                said = item(Path(tmp))
            except Exception as exc:  # one item failing says so and the rest still run
                said = f"could not measure: {type(exc).__name__}: {str(exc)[:100]}"
        print(f"{name}: {said}", flush=True)


if __name__ == "__main__":
    main()
