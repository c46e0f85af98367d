"""pydantic-ai's MCP client against `toolkeeper serve`: list → safe → risky (waits) → approve → again.

pydantic-ai 1.x called it `MCPServerStreamableHTTP`; 2.x removed that name for `MCPToolset`
(built on the FastMCP client). Driven without a model, through the toolset's own methods:
`list_tools()` and `direct_call_tool()` (what an agent's tool call ends in).

    /tmp/clients-venv/bin/python examples/clients/pydantic_ai_client.py
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import _smoke as smoke

CLIENT = "pydantic-ai"


async def risky_call(toolset: Any, args: dict[str, Any], watch: smoke.Watch) -> tuple[str, str]:
    from pydantic_ai.exceptions import ModelRetry
    with watch.observe():
        try:
            result = await toolset.direct_call_tool("broadcast_alert", args)
        except ModelRetry as exc:  # tool_error_behavior='retry' (the default): the model is told
            return "ModelRetry raised (the model gets this text and may retry)", str(exc)
        except Exception as exc:
            return f"{type(exc).__name__} raised", str(exc)
    return "returned", str(result)


async def run(ep: smoke.Endpoint, report: smoke.Report) -> None:
    from pydantic_ai import mcp

    try:
        mcp.MCPServerStreamableHTTP  # noqa: B018  (the name the brief and the 1.x docs use)
    except Exception as exc:
        report.note(f"pydantic_ai.mcp.MCPServerStreamableHTTP: {type(exc).__name__}: {exc}")

    op = smoke.Operator(ep.base_url, ep.state_dir)
    args = smoke.risky_args(CLIENT)
    heard: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append(message or "")
        watch_hook.add("progress_handler", f"progress={progress} total={total} message={message}")

    # 1. defaults, as in pydantic-ai's docs: MCPToolset(url, headers=…)
    toolset = mcp.MCPToolset(ep.mcp_url, headers=ep.headers)
    async with toolset:
        report.restart_clock()
        tools = await toolset.list_tools()
        names = sorted(t.name for t in tools)
        report.step("list", {"get_forecast", "broadcast_alert"} <= set(names), names)

        forecast = await toolset.direct_call_tool("get_forecast", smoke.SAFE_ARGS)
        report.step("safe call", smoke.SAFE_RESULT in str(forecast), forecast)

        # fastmcp's default progress handler logs at DEBUG under an INFO logger: read it unshown
        watch = smoke.Watch("defaults (no progress_handler)", hidden_loggers=("fastmcp.client.progress",))
        outcome, answer = await risky_call(toolset, args, watch)
        request_id = smoke.request_id_in(answer)
        report.wait(watch, outcome, answer, request_id=request_id)
        report.step("risky call waits, then answers pending", request_id is not None,
                    {"outcome": outcome, "answer": answer}, seconds=watch.seconds)

    # 2. the same wait with progress_handler= (what a UI could show): a second request
    args2 = smoke.risky_args(CLIENT + " (progress_handler)")
    watch_hook = smoke.Watch("progress_handler=on_progress")
    hooked = mcp.MCPToolset(ep.mcp_url, headers=ep.headers, progress_handler=on_progress)
    async with hooked:
        outcome2, answer2 = await risky_call(hooked, args2, watch_hook)
        report.wait(watch_hook, outcome2, answer2, request_id=smoke.request_id_in(answer2))
        report.step("risky call with progress_handler: progress heard", bool(heard),
                    {"messages": len(heard), "first": heard[:1]}, seconds=watch_hook.seconds)

    # 3. the operator approves the first request from outside; the client calls again
    assert request_id is not None
    t = time.monotonic()
    decided = op.approve(request_id)
    report.step("decision (operator API)", decided["state"] == "approved",
                {"id": request_id, "state": decided["state"]}, seconds=time.monotonic() - t)
    async with mcp.MCPToolset(ep.mcp_url, headers=ep.headers) as again:  # a new MCP session
        report.restart_clock()
        result = await again.direct_call_tool("broadcast_alert", args)
        report.step("result", smoke.RISKY_RESULT in str(result), result)
    smoke.check_ran_once(op, request_id, report)


def main() -> int:
    opts = smoke.arguments()
    report = smoke.Report(CLIENT, "pydantic-ai-slim[mcp] MCPToolset (fastmcp client)",
                          f"pydantic-ai-slim {smoke.pkg_version('pydantic-ai-slim')}, "
                          f"fastmcp {smoke.pkg_version('fastmcp-slim')}, mcp {smoke.pkg_version('mcp')}")
    try:
        with smoke.endpoint(opts.approval_wait) as (ep, _):
            asyncio.run(run(ep, report))
    except Exception as exc:
        report.step("error", False, f"{type(exc).__name__}: {exc}")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
