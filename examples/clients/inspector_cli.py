"""The MCP Inspector CLI against `toolkeeper serve` (one process per request, as its users run it).

    npx -y @modelcontextprotocol/inspector@VERSION --cli URL --transport http \\
        --header "Authorization: Bearer tkc_…" --method tools/call --tool-name … --tool-arg k=v

Every line the CLI prints (stdout and stderr) is recorded with the time it arrived. Two waits:
the defaults, and `--tool-metadata progressToken=…` (the CLI sends no progress token itself).
Needs node and npx (the npm registry); INSPECTOR_VERSION picks the version.

    python3 examples/clients/inspector_cli.py
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from typing import Any

import _smoke as smoke

CLIENT = "mcp-inspector-cli"
VERSION = os.environ.get("INSPECTOR_VERSION", "2.12.0")
NOISE = "npm warn"  # npx's own warnings on stderr (engine, config), not the Inspector's


def inspector(ep: smoke.Endpoint, *method: str, label: str) -> tuple[int, smoke.Watch, str]:
    argv = ["npx", "-y", f"@modelcontextprotocol/inspector@{VERSION}", "--cli", ep.mcp_url,
            "--transport", "http", "--header", f"Authorization: Bearer {ep.client_token}", *method]
    shown = [a if not a.startswith("Authorization") else "Authorization: Bearer tkc_…" for a in argv]
    smoke.say("$", shlex.join(shown))
    watch = smoke.Watch(label)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    out, err = smoke.Lines(proc.stdout), smoke.Lines(proc.stderr)
    rc = proc.wait(300)
    time.sleep(0.1)  # let the readers take the last lines
    watch.seconds = round(time.monotonic() - watch.t0, 2)
    answered = min((t for t, _ in out.lines), default=float("inf"))  # the CLI prints its result at once
    for name, lines in (("stdout", out), ("stderr", err)):
        for t, line in lines.lines:
            if not (name == "stderr" and line.lower().startswith(NOISE)):
                via = name if t < answered else f"{name} (with the result)"
                watch.events.append({"t": round(t - watch.t0, 2), "via": via, "text": line})
    watch.events.sort(key=lambda e: e["t"])
    stdout = "\n".join(line for _, line in out.lines)
    return rc, watch, stdout


def payload(stdout: str) -> Any:
    try:
        return json.loads(stdout)
    except ValueError:
        return stdout


def text_of(result: Any) -> str:
    if isinstance(result, dict):
        return "\n".join(c.get("text", "") for c in result.get("content", []))
    return str(result)


def run(ep: smoke.Endpoint, report: smoke.Report) -> None:
    op = smoke.Operator(ep.base_url, ep.state_dir)
    rc, watch, out = inspector(ep, "--method", "tools/list", label="tools/list")
    names = sorted(t["name"] for t in payload(out).get("tools", [])) if rc == 0 else out
    report.step("list", rc == 0 and {"get_forecast", "broadcast_alert"} <= set(names), names,
                seconds=watch.seconds)

    rc, watch, out = inspector(ep, "--method", "tools/call", "--tool-name", "get_forecast",
                               "--tool-arg", "city=Lisbon", "days=2", label="get_forecast")
    report.step("safe call", rc == 0 and smoke.SAFE_RESULT in text_of(payload(out)), payload(out),
                seconds=watch.seconds)

    args = smoke.risky_args(CLIENT)
    call = ["--method", "tools/call", "--tool-name", "broadcast_alert", "--tool-args-json", json.dumps(args)]
    rc, watch, out = inspector(ep, *call, label="defaults")
    answer = text_of(payload(out))
    request_id = smoke.request_id_in(answer)
    report.wait(watch, f"exit {rc}; result printed at the end", answer, request_id=request_id)
    report.step("risky call waits, then answers pending", request_id is not None,
                {"exit": rc, "answer": answer}, seconds=watch.seconds)

    args2 = smoke.risky_args(CLIENT + " (progressToken)")
    rc2, watch2, out2 = inspector(ep, "--method", "tools/call", "--tool-name", "broadcast_alert",
                                  "--tool-args-json", json.dumps(args2),
                                  "--tool-metadata", "progressToken=tk-smoke-1",
                                  label="--tool-metadata progressToken=tk-smoke-1")
    report.wait(watch2, f"exit {rc2}; result printed at the end", text_of(payload(out2)),
                request_id=smoke.request_id_in(text_of(payload(out2))))

    assert request_id is not None
    t = time.monotonic()
    decided = op.approve(request_id)
    report.step("decision (operator API)", decided["state"] == "approved",
                {"id": request_id, "state": decided["state"]}, seconds=time.monotonic() - t)
    rc, watch, out = inspector(ep, *call, label="again")  # a new process, a new MCP session
    result = payload(out)
    report.step("result", rc == 0 and smoke.RISKY_RESULT in text_of(result), result, seconds=watch.seconds)
    smoke.check_ran_once(op, request_id, report)


def main() -> int:
    opts = smoke.arguments()
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip() \
        if shutil.which("node") else "missing"
    report = smoke.Report(CLIENT, f"@modelcontextprotocol/inspector --cli (npx, node {node})",
                          f"@modelcontextprotocol/inspector {VERSION}")
    try:
        with smoke.endpoint(opts.approval_wait) as (ep, _):
            run(ep, report)
    except Exception as exc:
        report.step("error", False, f"{type(exc).__name__}: {exc}")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
