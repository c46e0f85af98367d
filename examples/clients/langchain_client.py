"""langchain-mcp-adapters against `toolkeeper serve`.

`MultiServerMCPClient({"toolkeeper": {"transport": "streamable_http", "url", "headers"}})`,
`get_tools()`, then each tool's `ainvoke` with a tool call (what a LangChain/LangGraph agent does;
the answer is the `ToolMessage` the model gets). Each call opens its own MCP session. Two waits:
the defaults (no callbacks), and `Callbacks(on_progress=…)`.

    /tmp/clients-venv/bin/python examples/clients/langchain_client.py
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import _smoke as smoke

CLIENT = "langchain-mcp-adapters"


def tool_call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "args": args, "id": f"call_{name}_{time.monotonic_ns()}", "type": "tool_call"}


def content_text(message: Any) -> str:
    content = getattr(message, "content", message)
    if isinstance(content, list):
        return "\n".join(b.get("text", str(b)) if isinstance(b, dict) else str(b) for b in content)
    return str(content)


async def risky(tool: Any, args: dict[str, Any], watch: smoke.Watch) -> tuple[str, str]:
    with watch.observe():
        try:
            message = await tool.ainvoke(tool_call(tool.name, args))
        except Exception as exc:
            return f"{type(exc).__name__} raised", str(exc)
    return f"ToolMessage(status={getattr(message, 'status', '?')!r})", content_text(message)


async def run(ep: smoke.Endpoint, report: smoke.Report) -> None:
    from langchain_mcp_adapters.callbacks import Callbacks
    from langchain_mcp_adapters.client import MultiServerMCPClient

    op = smoke.Operator(ep.base_url, ep.state_dir)
    connections: Any = {"toolkeeper": {"transport": "streamable_http", "url": ep.mcp_url,
                                       "headers": ep.headers}}
    client = MultiServerMCPClient(connections)
    report.restart_clock()
    tools = {t.name: t for t in await client.get_tools()}
    report.step("list", {"get_forecast", "broadcast_alert"} <= set(tools), sorted(tools))
    forecast = await tools["get_forecast"].ainvoke(tool_call("get_forecast", smoke.SAFE_ARGS))
    report.step("safe call", smoke.SAFE_RESULT in content_text(forecast), content_text(forecast))

    args = smoke.risky_args(CLIENT)
    watch = smoke.Watch("defaults (no callbacks)")
    outcome, answer = await risky(tools["broadcast_alert"], args, watch)
    request_id = smoke.request_id_in(answer)
    report.wait(watch, outcome, answer, request_id=request_id)
    report.step("risky call waits, then answers pending", request_id is not None,
                {"outcome": outcome, "answer": answer}, seconds=watch.seconds)

    hooked_watch = smoke.Watch("Callbacks(on_progress=…)")

    async def on_progress(progress: float, total: float | None, message: str | None, context: Any) -> None:
        hooked_watch.add("on_progress", f"progress={progress} total={total} message={message} "
                                        f"(server={context.server_name}, tool={context.tool_name})")

    hooked = MultiServerMCPClient(connections, callbacks=Callbacks(on_progress=on_progress))
    hooked_tools = {t.name: t for t in await hooked.get_tools()}
    args2 = smoke.risky_args(CLIENT + " (on_progress)")
    outcome2, answer2 = await risky(hooked_tools["broadcast_alert"], args2, hooked_watch)
    report.wait(hooked_watch, outcome2, answer2, request_id=smoke.request_id_in(answer2))
    heard = [e for e in hooked_watch.events if e["via"] == "on_progress"]
    report.step("risky call with on_progress: progress heard", bool(heard), {"notifications": len(heard)},
                seconds=hooked_watch.seconds)

    assert request_id is not None
    t = time.monotonic()
    decided = op.approve(request_id)
    report.step("decision (operator API)", decided["state"] == "approved",
                {"id": request_id, "state": decided["state"]}, seconds=time.monotonic() - t)
    report.restart_clock()
    again = await tools["broadcast_alert"].ainvoke(tool_call("broadcast_alert", args))
    status = getattr(again, "status", None)
    report.step("result", smoke.RISKY_RESULT in content_text(again) and status == "success",
                {"status": status, "content": content_text(again)})
    smoke.check_ran_once(op, request_id, report)


def main() -> int:
    opts = smoke.arguments()
    versions = (f"langchain-mcp-adapters {smoke.pkg_version('langchain-mcp-adapters')}, "
                f"langchain-core {smoke.pkg_version('langchain-core')}, mcp {smoke.pkg_version('mcp')}")
    report = smoke.Report(CLIENT, "langchain-mcp-adapters MultiServerMCPClient", versions)
    try:
        with smoke.endpoint(opts.approval_wait) as (ep, _):
            asyncio.run(run(ep, report))
    except Exception as exc:
        report.step("error", False, f"{type(exc).__name__}: {exc}")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
