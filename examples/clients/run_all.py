"""Smoke run: five kinds of MCP client against a real `toolkeeper serve`.

For each client: list tools → get_forecast (safe) → broadcast_alert (CRITICAL, waits for a person)
→ the operator approves through the HTTP API → the same call again → it ran once. Records what
each client surfaces while the call waits. One server for the HTTP clients:

    toolkeeper serve examples/weather.py --no-builtins --port 0 --state-dir TMP --approval-wait 8

and the stdio client launches its own from `toolkeeper install claude-desktop --print`.

    python3 examples/clients/run_all.py --setup   # once: /tmp/clients-venv with the client libraries
    python3 examples/clients/run_all.py           # the run; JSON report in --out
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import _smoke as smoke

HERE = Path(__file__).resolve().parent
CLIENTS_VENV = Path(os.environ.get("CLIENTS_VENV", "/tmp/clients-venv"))
# the versions this smoke run was written against; the client libraries pin an older mcp than
# the project's, so they live in their own venv (they talk to serve over HTTP)
CLIENT_PACKAGES = ["pydantic-ai-slim[mcp]==2.68.0", "openai-agents==0.24.0", "langchain-mcp-adapters==0.3.2"]


def clients_python() -> str:
    return str(CLIENTS_VENV / "bin" / "python")


def project_python() -> str:
    venv = smoke.REPO / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


# name → (script, interpreter, uses the shared HTTP server)
CLIENTS: dict[str, tuple[str, Any, bool]] = {
    "inspector": ("inspector_cli.py", lambda: sys.executable, True),
    "pydantic-ai": ("pydantic_ai_client.py", clients_python, True),
    "openai-agents": ("openai_agents_client.py", clients_python, True),
    "langchain": ("langchain_client.py", clients_python, True),
    "stdio": ("stdio_desktop.py", project_python, False),
}


def setup() -> None:
    if not (CLIENTS_VENV / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(CLIENTS_VENV)], check=True)
    subprocess.run([clients_python(), "-m", "pip", "install", "-q", *CLIENT_PACKAGES], check=True)


def run_client(name: str, env: dict[str, str]) -> dict[str, Any]:
    script, python, _ = CLIENTS[name]
    exe = python()
    if not Path(exe).exists():
        return {"client": name, "ok": False, "steps": [{"step": "start", "ok": False, "seconds": 0,
                "detail": f"{exe} missing: run `python3 {HERE / 'run_all.py'} --setup`"}], "waits": []}
    smoke.say(f"\n=== {name}: {exe} {script}")
    started = time.monotonic()
    proc = subprocess.Popen([exe, str(HERE / script)], cwd=smoke.REPO, env=env, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    report: dict[str, Any] | None = None
    for line in proc.stdout:
        if line.startswith("SMOKE-REPORT "):
            report = json.loads(line.removeprefix("SMOKE-REPORT "))
        else:
            sys.stdout.write(line)
    rc = proc.wait()
    if report is None:
        report = {"client": name, "ok": False, "waits": [],
                  "steps": [{"step": "report", "ok": False, "seconds": 0, "detail": f"exit {rc}, no report"}]}
    report["total_seconds"] = round(time.monotonic() - started, 1)
    return report


def roles(ep: smoke.Endpoint) -> dict[str, Any]:
    """Before the clients: the printed config's token is a client's, the operator's is refused
    on /mcp, and a client token cannot decide."""
    import urllib.error
    import urllib.request

    def post(path: str, token: str, body: dict[str, Any]) -> tuple[int, str]:
        req = urllib.request.Request(f"{ep.base_url}{path}", data=json.dumps(body).encode(), method="POST",
                                     headers={"Authorization": f"Bearer {token}",
                                              "Content-Type": "application/json",
                                              "Accept": "application/json, text/event-stream"})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, resp.read().decode()[:300]
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()[:300]

    report = smoke.Report("roles (preflight)", "urllib", "-")
    operator = (ep.state_dir / "token").read_text().strip()
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "smoke", "version": "0"}}}
    code, body = post("/mcp", operator, init)
    report.step("operator token refused on /mcp", code == 403, {"status": code, "body": body}, seconds=0)
    code, body = post("/api/approvals/apr_none/decision", ep.client_token, {"decision": "approve"})
    report.step("client token cannot decide", code == 403, {"status": code, "body": body}, seconds=0)
    report.data["ok"] = all(s["ok"] for s in report.data["steps"])
    report.data["total_seconds"] = 0
    return report.data


def during(wait: dict[str, Any]) -> list[str]:
    """What reached a person or a hook before the call answered, repeats folded."""
    seen: dict[tuple[str, str], list[float]] = {}
    for e in wait["events"]:
        if "with the result" not in e["via"]:
            text = e["text"]
            if e["via"] in ("progress_handler", "on_progress", "progress_callback", "message_handler"):
                text = text.split("message=", 1)[-1]
            seen.setdefault((e["via"], text), []).append(e["t"])
    return [f"{via}: {text!r} at +{', +'.join(f'{t:g}' for t in ts)}s" for (via, text), ts in seen.items()]


def summary(reports: list[dict[str, Any]]) -> str:
    out = []
    for r in reports:
        out.append(f"\n## {r['client']}: {'PASS' if r.get('ok') else 'FAIL'} ({r.get('total_seconds')} s)")
        out.append(f"   {r.get('library', '')} — {r.get('version', '')}")
        for s in r["steps"]:
            detail = json.dumps(s["detail"]) if not isinstance(s["detail"], str) else s["detail"]
            marks = ("holds", "FINDING") if s.get("finding") else ("ok  ", "FAIL")
            mark = marks[0] if s["ok"] else marks[1]
            width = 600 if s.get("finding") else 160
            out.append(f"   {mark} {s['step']} ({s['seconds']} s): {detail[:width]}")
        for w in r.get("waits", []):
            shown = during(w)
            out.append(f"   while waiting [{w['label']}]: {w['outcome']} after {w['seconds']} s")
            out.extend(f"      {line}" for line in shown) if shown else out.append("      nothing")
        out.extend(f"   note: {n[:300]}" for n in r.get("notes", []))
    return "\n".join(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--setup", action="store_true", help=f"create {CLIENTS_VENV} with {CLIENT_PACKAGES}")
    p.add_argument("--only", action="append", choices=list(CLIENTS), help="run these clients (repeatable)")
    p.add_argument("--approval-wait", type=float, default=8.0, help="serve's --approval-wait (s)")
    p.add_argument("--out", default="/tmp/toolkeeper-client-smoke.json", help="the JSON report")
    opts = p.parse_args()
    if opts.setup:
        setup()
        return 0
    names = opts.only or list(CLIENTS)
    reports = []
    with smoke.Server(opts.approval_wait) as ep:
        env = {**os.environ, "TK_SMOKE_URL": ep.base_url, "TK_SMOKE_TOKEN": ep.client_token,
               "TK_SMOKE_STATE": str(ep.state_dir), "TK_SMOKE_WAIT": str(opts.approval_wait),
               "PYTHONUNBUFFERED": "1"}
        reports.append(roles(ep))
        for name in names:
            uses_server = CLIENTS[name][2]
            reports.append(run_client(name, env if uses_server else {
                k: v for k, v in env.items() if not k.startswith("TK_SMOKE_")}))
    Path(opts.out).write_text(json.dumps(reports, indent=2))
    print(summary(reports))
    print(f"\nJSON report: {opts.out}")
    findings = [f"{r['client']}: {s['step']}" for r in reports for s in r["steps"]
                if s.get("finding") and not s["ok"]]
    for finding in findings:
        print(f"FINDING (not counted as a failure; see the step above): {finding}")
    failed = [r["client"] for r in reports if not r.get("ok")]
    print("ALL PASS" if not failed else f"FAILED: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
