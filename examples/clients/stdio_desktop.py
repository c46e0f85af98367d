"""A desktop-style stdio launch: the entry `toolkeeper install claude-desktop --print` prints, run
exactly as written (command, args, env) from cwd "/", with the official `mcp` stdio client.

Claude Desktop and Cursor spawn the command with a small environment and show the server's stderr
in their MCP log; this script records every stderr line with the time it arrived. The approval
page is served on loopback in stdio mode; its link and the state dir come from that stderr.

HOME is a fresh temp dir (so the state goes to TMP/.local/state/toolkeeper, not yours; the mcp
client passes HOME, PATH, USER, … through as a desktop client does); --real-home keeps yours.
serve's default --approval-wait (30 s) applies: the entry does not set one.

Three calls of broadcast_alert: (A) defaults, no progress callback: waits, answers pending;
(B) with a progress callback, approved by the operator while it waits: answers the result;
(C) A made again after the operator approved A's request: runs once.

    .venv/bin/python examples/clients/stdio_desktop.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _smoke as smoke

CLIENT = "stdio (desktop launch)"


def text_of(result: Any) -> str:
    return "\n".join(getattr(c, "text", str(c)) for c in result.content)


def server_log(stderr: smoke.Lines, watch: smoke.Watch) -> None:
    """The server's stderr lines during the call: what a desktop client's MCP log shows."""
    for t, line in stderr.between(watch.t0, watch.t0 + (watch.seconds or 0)):
        watch.events.append({"t": round(t, 2), "via": "server stderr (desktop MCP log)", "text": line})
    watch.events.sort(key=lambda e: e["t"])


def desktop_entry(report: smoke.Report) -> dict[str, Any]:
    argv = [smoke.toolkeeper_exe(), "install", "claude-desktop", "--print", "examples/weather.py"]
    smoke.say("$", " ".join(argv), f"(cwd {smoke.REPO})")
    printed = subprocess.run(argv, cwd=smoke.REPO, capture_output=True, text=True, check=True).stdout
    entry: dict[str, Any] = json.loads(printed)["mcpServers"]["toolkeeper"]
    report.note("toolkeeper install claude-desktop --print examples/weather.py → " + json.dumps(entry))
    return entry


async def run(entry: dict[str, Any], report: smoke.Report) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=entry["command"], args=entry.get("args", []),
                                   env=entry.get("env") or None, cwd="/")
    read_fd, write_fd = os.pipe()
    errlog = os.fdopen(write_fd, "w")
    stderr = smoke.Lines(os.fdopen(read_fd), echo="  stdio! ")
    try:
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write) as session:
            report.restart_clock()
            await session.initialize()
            page = stderr.wait_for(r"approval page: (http://127\.0\.0\.1:\d+)/login", 30).group(1)
            state = Path(stderr.wait_for(r"state: (\S+)", 5).group(1))
            report.step("start (initialize; page link and state dir on stderr)", True,
                        {"page": page, "state": str(state)})
            op = smoke.Operator(page, state)

            tools = await session.list_tools()
            names = sorted(t.name for t in tools.tools)
            report.step("list", {"get_forecast", "broadcast_alert"} <= set(names), names)
            forecast = await session.call_tool("get_forecast", smoke.SAFE_ARGS)
            report.step("safe call", smoke.SAFE_RESULT in text_of(forecast), text_of(forecast))

            # A: no progress callback (the mcp client then sends no progress token)
            args = smoke.risky_args(CLIENT)
            watch = smoke.Watch("A: defaults (no progress_callback)")
            with watch.observe():
                result = await session.call_tool("broadcast_alert", args)
            server_log(stderr, watch)
            answer = text_of(result)
            request_id = smoke.request_id_in(answer)
            report.wait(watch, f"CallToolResult(isError={result.is_error})", answer, request_id=request_id)
            report.step("risky call waits, then answers pending", request_id is not None,
                        {"isError": result.is_error, "answer": answer}, seconds=watch.seconds)

            # B: a progress callback; the operator approves while the call waits
            args_b = smoke.risky_args(CLIENT + " (approved while waiting)")
            watch_b = smoke.Watch("B: progress_callback, approved while waiting")
            approved: list[str] = []

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                watch_b.add("progress_callback", f"progress={progress} total={total} message={message}")
                rid = smoke.request_id_in(message or "")
                if rid and not approved:
                    approved.append(rid)
                    decided = await asyncio.to_thread(op.approve, rid)
                    watch_b.add("operator", f"approved {rid} via the API: {decided['state']}")

            with watch_b.observe():
                result_b = await session.call_tool("broadcast_alert", args_b, progress_callback=on_progress)
            server_log(stderr, watch_b)
            report.wait(watch_b, f"CallToolResult(isError={result_b.is_error})", text_of(result_b),
                        request_id=approved[0] if approved else None)
            report.step("approved while waiting: the same call answers the result",
                        bool(approved) and smoke.RISKY_RESULT in text_of(result_b), text_of(result_b),
                        seconds=watch_b.seconds)
            if approved:
                smoke.check_ran_once(op, approved[0], report)

            # C: A's request approved from outside after A gave up; the same call again
            assert request_id is not None
            t = time.monotonic()
            decided = op.approve(request_id)
            report.step("decision (operator API)", decided["state"] == "approved",
                        {"id": request_id, "state": decided["state"]}, seconds=time.monotonic() - t)
            report.restart_clock()
            again = await session.call_tool("broadcast_alert", args)
            report.step("result", smoke.RISKY_RESULT in text_of(again) and not again.is_error, text_of(again))
            smoke.check_ran_once(op, request_id, report)
    finally:
        errlog.close()
    report.note("server stderr, whole run: " + json.dumps([line for _, line in stderr.lines]))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--real-home", action="store_true", help="keep HOME (state in your ~/.local/state)")
    opts = p.parse_args()
    report = smoke.Report(CLIENT, "mcp (official Python SDK) stdio_client + ClientSession",
                          f"mcp {smoke.pkg_version('mcp')}")
    try:
        entry = desktop_entry(report)
        with tempfile.TemporaryDirectory(prefix="tk-smoke-home-") as home:
            if not opts.real_home:
                os.environ["HOME"] = home
            asyncio.run(run(entry, report))
    except Exception as exc:
        report.step("error", False, f"{type(exc).__name__}: {exc}")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
