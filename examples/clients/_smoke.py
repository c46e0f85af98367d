"""Shared plumbing for the client smoke run (stdlib only: it runs in any client's venv).

- `Server`: a real `toolkeeper serve` process (port 0, a temp state dir), its start lines parsed.
- `Operator`: the person, from outside the client: the HTTP API with the operator token read
  from the state dir (the client never sees it).
- `Watch`: records what a client surfaces while a call waits — log records, text written to
  stdout/stderr, and whatever the client's own hooks (progress callbacks, message handlers) get.
- `Report`: the steps of one client's run, printed as one `SMOKE-REPORT {json}` line on stdout.

Each client script runs alone (it starts its own server) or under run_all.py, which passes one
server's coordinates in the environment (TK_SMOKE_*).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
WEATHER = REPO / "examples" / "weather.py"
REQUEST_ID = re.compile(r"apr_[A-Za-z0-9_-]+")
SAFE_ARGS = {"city": "Lisbon", "days": 2}
SAFE_RESULT = "sunny for 2 day(s)"
RISKY_RESULT = "alert for PT-11 sent to"


def risky_args(client: str) -> dict[str, Any]:
    """broadcast_alert's arguments, one message per client so no two runs share a request."""
    return {"alert": {"region": "PT-11", "level": "red",
                      "message": f"smoke test from {client} at {time.strftime('%H:%M:%S')}"},
            "channels": ["sms"]}


def toolkeeper_exe() -> str:
    """The `toolkeeper` command: $TOOLKEEPER, else the repo's venv, else PATH."""
    if os.environ.get("TOOLKEEPER"):
        return os.environ["TOOLKEEPER"]
    local = REPO / ".venv" / "bin" / "toolkeeper"
    if local.exists():
        return str(local)
    found = shutil.which("toolkeeper")
    if not found:
        raise SystemExit("no toolkeeper command: set TOOLKEEPER=/path/to/toolkeeper")
    return found


def say(*parts: object) -> None:
    print(*parts, file=sys.__stderr__, flush=True)


class Lines:
    """Reads a pipe line by line in a thread, each line with the time it arrived."""

    def __init__(self, stream: io.TextIOBase | Any, echo: str | None = None) -> None:
        self.lines: list[tuple[float, str]] = []
        self._cond = threading.Condition()
        self._echo = echo
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: Any) -> None:
        for raw in stream:
            line = raw.rstrip("\n")
            with self._cond:
                self.lines.append((time.monotonic(), line))
                self._cond.notify_all()
            if self._echo is not None:
                say(f"{self._echo}{line}")

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        rx = re.compile(pattern)
        with self._cond:
            while True:
                for _, line in self.lines:
                    m = rx.search(line)
                    if m:
                        return m
                left = deadline - time.monotonic()
                if left <= 0:
                    got = "\n".join(line for _, line in self.lines)
                    raise TimeoutError(f"no line matching {pattern!r} within {timeout}s; got:\n{got}")
                self._cond.wait(left)

    def between(self, start: float, end: float) -> list[tuple[float, str]]:
        return [(t - start, line) for t, line in self.lines if start <= t <= end]


@dataclass
class Endpoint:
    base_url: str  # http://127.0.0.1:PORT
    client_token: str
    state_dir: Path

    @property
    def mcp_url(self) -> str:
        return f"{self.base_url}/mcp"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.client_token}"}


class Server:
    """`toolkeeper serve examples/weather.py --no-builtins --port 0 --state-dir DIR --approval-wait N`."""

    def __init__(self, approval_wait: float, state_dir: Path | None = None) -> None:
        self.approval_wait = approval_wait
        self._tmp = None if state_dir else tempfile.TemporaryDirectory(prefix="tk-smoke-")
        self.state_dir = state_dir or Path(self._tmp.name) / "state"  # type: ignore[union-attr]
        self.argv = [toolkeeper_exe(), "serve", str(WEATHER), "--no-builtins", "--port", "0",
                     "--state-dir", str(self.state_dir), "--approval-wait", str(approval_wait)]
        self.proc: subprocess.Popen[str] | None = None
        self.start_lines: list[str] = []

    def start(self) -> Endpoint:
        say("$", " ".join(self.argv))
        self.proc = subprocess.Popen(self.argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, bufsize=1)
        self.out = Lines(self.proc.stdout, echo="  serve| ")
        self.err = Lines(self.proc.stderr, echo="  serve! ")
        self.out.wait_for(r"^state: ", 60)
        self.start_lines = [line for _, line in self.out.lines]
        base = self.out.wait_for(r"serving on (http://\S+) \(MCP at /mcp\)", 1).group(1)
        config = json.loads(self.out.wait_for(r"^client config: (.*)$", 1).group(1))
        entry = config["mcpServers"]["toolkeeper"]
        assert entry["url"] == f"{base}/mcp", entry
        token = entry["headers"]["Authorization"].removeprefix("Bearer ")
        assert token.startswith("tkc_"), "the printed config must carry a client token"
        return Endpoint(base, token, self.state_dir)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self._tmp:
            self._tmp.cleanup()

    def __enter__(self) -> Endpoint:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Operator:
    """The person who decides: the HTTP API with the operator token (DIR/token)."""

    def __init__(self, base_url: str, state_dir: Path) -> None:
        self.base_url = base_url
        self.token = (state_dir / "token").read_text().strip()

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{self.base_url}{path}", data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"{method} {path}: HTTP {exc.code}: {exc.read().decode()}") from exc

    def get(self, request_id: str) -> dict[str, Any]:
        return self._call("GET", f"/api/approvals/{request_id}")  # type: ignore[no-any-return]

    def audit(self) -> list[dict[str, Any]]:
        return self._call("GET", "/api/audit")["entries"]  # type: ignore[no-any-return]

    def pending(self) -> list[dict[str, Any]]:
        return self._call("GET", "/api/approvals?state=pending")["approvals"]  # type: ignore[no-any-return]

    def find_pending(self, tool: str, arguments: dict[str, Any], timeout: float = 10) -> dict[str, Any]:
        """The card a person would pick from the inbox: this tool, these arguments."""
        deadline = time.monotonic() + timeout
        while True:
            for req in self.pending():
                if req["tool"] == tool and same_arguments(req["arguments"], arguments):
                    return req
            if time.monotonic() > deadline:
                raise LookupError(f"no pending {tool} request with {arguments}")
            time.sleep(0.2)

    def approve(self, request_id: str) -> dict[str, Any]:
        seen = self.get(request_id)  # approve what was shown: its digest binds the decision
        return self._call("POST", f"/api/approvals/{request_id}/decision",  # type: ignore[no-any-return]
                          {"decision": "approve", "args_digest": seen["args_digest"]})


def same_arguments(stored: dict[str, Any], sent: dict[str, Any]) -> bool:
    return all(stored.get(k) == v for k, v in sent.items()) and all(
        v is None for k, v in stored.items() if k not in sent)


class _Capture(logging.Handler):
    def __init__(self, sink: Callable[[str, str], None]) -> None:
        super().__init__(logging.NOTSET)
        self._sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            self._sink("log", f"{record.levelname} {record.name}: {record.getMessage()}")


class _Tee(io.TextIOBase):
    def __init__(self, real: Any, sink: Callable[[str, str], None], name: str) -> None:
        self._real, self._sink, self._name, self._buf = real, sink, name, ""

    def write(self, s: str) -> int:
        self._real.write(s)
        self._buf += s
        while "\n" in self._buf:
            line, self._buf = self._buf.split("\n", 1)
            if line.strip():
                self._sink(self._name, line)
        return len(s)

    def flush(self) -> None:
        self._real.flush()

    def isatty(self) -> bool:
        return False


@dataclass
class Watch:
    """Everything a client surfaced during one call, with seconds since the call started.

    `log`: records the client's loggers emitted at their configured levels (the default: what a
    person could see once logging is shown); `stderr`/`stdout`: text the process wrote (what a
    person sees in a terminal); anything else: a hook of the client's own (`progress`, `message`).
    """

    label: str
    hidden_loggers: tuple[str, ...] = ()  # read at DEBUG without showing them: via "hidden-debug-log"
    t0: float = field(default_factory=time.monotonic)
    events: list[dict[str, Any]] = field(default_factory=list)
    seconds: float | None = None

    def add(self, via: str, text: str) -> None:
        self.events.append({"t": round(time.monotonic() - self.t0, 2), "via": via, "text": text})

    @contextlib.contextmanager
    def observe(self) -> Iterator[Watch]:
        handler = _Capture(self.add)
        loggers = [logging.getLogger()] + [
            lg for lg in logging.root.manager.loggerDict.values()
            if isinstance(lg, logging.Logger) and not lg.propagate]
        for lg in loggers:
            lg.addHandler(handler)
        hidden = _Capture(lambda _via, text: self.add("hidden-debug-log", text))
        saved = []
        for name in self.hidden_loggers:
            lg = logging.getLogger(name)
            saved.append((lg, lg.level, lg.propagate, lg.handlers[:]))
            lg.setLevel(logging.DEBUG)
            lg.propagate = False
            lg.handlers = [hidden]
        self.t0 = time.monotonic()
        try:
            with contextlib.redirect_stderr(_Tee(sys.stderr, self.add, "stderr")), \
                    contextlib.redirect_stdout(_Tee(sys.stdout, self.add, "stdout")):
                yield self
        finally:
            self.seconds = round(time.monotonic() - self.t0, 2)
            for lg in loggers:
                lg.removeHandler(handler)
            for lg, level, propagate, handlers in saved:
                lg.setLevel(level)
                lg.propagate = propagate
                lg.handlers = handlers

    def shown(self, vias: tuple[str, ...] = ("stderr", "stdout")) -> list[str]:
        return [f"+{e['t']}s {e['via']}: {e['text']}" for e in self.events if e["via"] in vias]

    def as_dict(self) -> dict[str, Any]:
        # httpx/httpcore request logs say nothing about the wait: keep the rest
        keep = [e for e in self.events if not (e["via"] == "log" and
                                                re.match(r"\w+ (httpx|httpcore|hpack)", e["text"]))]
        return {"label": self.label, "seconds": self.seconds, "events": keep}


class Report:
    def __init__(self, client: str, library: str, version: str) -> None:
        self.data: dict[str, Any] = {"client": client, "library": library, "version": version,
                                     "steps": [], "waits": [], "ok": False, "notes": []}
        self._t = time.monotonic()

    def step(self, name: str, ok: bool, detail: Any = None, seconds: float | None = None) -> None:
        seconds = round(time.monotonic() - self._t if seconds is None else seconds, 2)
        self.data["steps"].append({"step": name, "ok": ok, "seconds": seconds, "detail": detail})
        say(f"[{self.data['client']}] {'ok ' if ok else 'FAIL'} {name} ({seconds}s): "
            f"{json.dumps(detail)[:400]}")
        self._t = time.monotonic()

    def finding(self, name: str, holds: bool, detail: Any, seconds: float) -> None:
        """A behaviour serve promises, checked but kept out of pass/fail (see the report)."""
        self.data["steps"].append({"step": name, "ok": holds, "seconds": round(seconds, 2), "detail": detail,
                                   "finding": True})
        say(f"[{self.data['client']}] {'holds' if holds else 'FINDING'} {name} ({round(seconds, 2)}s): "
            f"{json.dumps(detail)[:400]}")

    def restart_clock(self) -> None:
        self._t = time.monotonic()

    def wait(self, watch: Watch, outcome: str, answer: str, **extra: Any) -> None:
        self.data["waits"].append({**watch.as_dict(), "outcome": outcome, "answer": answer, **extra})
        say(f"[{self.data['client']}] wait '{watch.label}': {outcome} after {watch.seconds}s; "
            f"surfaced: {len(watch.events)} event(s)")

    def note(self, text: str) -> None:
        self.data["notes"].append(text)

    def finish(self) -> int:
        steps = [s for s in self.data["steps"] if not s.get("finding")]
        ran = any(s["ok"] and s["step"] == "result" for s in steps)
        self.data["ok"] = all(s["ok"] for s in steps) and ran
        print("SMOKE-REPORT " + json.dumps(self.data), flush=True)
        return 0 if self.data["ok"] else 1


def request_id_in(text: str) -> str | None:
    m = REQUEST_ID.search(text or "")
    return m.group(0) if m else None


def check_ran_once(op: Operator, request_id: str, report: Report) -> None:
    """The operator's view: the request is done, and the audit log has exactly one run of it."""
    stored = op.get(request_id)
    runs = [e for e in op.audit() if e.get("approval_id") == request_id and e.get("status") == "ok"]
    ran = stored["state"] == "done" and (stored.get("result") or {}).get("status") == "ok"
    report.step("ran once (operator's view)", ran and len(runs) == 1, {
        "state": stored["state"], "result": stored.get("result"),
        "approver": (stored.get("decision") or {}).get("approver"),
        "audit rows with status ok": [{"call_id": e["call_id"], "duration_ms": round(e["duration_ms"], 1)}
                                      for e in runs]}, seconds=0)


def arguments(approval_wait: float = 8.0) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--approval-wait", type=float, default=approval_wait,
                   help="serve's --approval-wait when this script starts its own server")
    return p.parse_args()


@contextlib.contextmanager
def endpoint(approval_wait: float) -> Iterator[tuple[Endpoint, float]]:
    """run_all's server (TK_SMOKE_URL, TK_SMOKE_TOKEN, TK_SMOKE_STATE, TK_SMOKE_WAIT) or our own."""
    if os.environ.get("TK_SMOKE_URL"):
        yield (Endpoint(os.environ["TK_SMOKE_URL"], os.environ["TK_SMOKE_TOKEN"],
                        Path(os.environ["TK_SMOKE_STATE"])), float(os.environ["TK_SMOKE_WAIT"]))
        return
    with Server(approval_wait) as ep:
        yield ep, approval_wait


def pkg_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"
