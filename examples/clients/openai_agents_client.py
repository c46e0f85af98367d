"""The OpenAI Agents SDK's MCP client against `toolkeeper serve`.

`agents.mcp.MCPServerStreamableHttp(params={"url", "headers"}, client_session_timeout_seconds=…)`,
driven through its own `list_tools()` / `call_tool()` (what an agent's tool call ends in).
Three waits: the SDK's default session timeout (5 s, shorter than serve's wait), a longer one,
and a longer one with a progress token in `_meta` and a `message_handler` (the SDK sends no
progress token of its own).

    /tmp/clients-venv/bin/python examples/clients/openai_agents_client.py
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import _smoke as smoke

CLIENT = "openai-agents"


def text_of(result: Any) -> str:
    return "\n".join(getattr(c, "text", str(c)) for c in result.content)


async def risky(server: Any, args: dict[str, Any], watch: smoke.Watch,
                meta: dict[str, Any] | None = None) -> tuple[str, str]:
    with watch.observe():
        try:
            result = await server.call_tool("broadcast_alert", args, meta=meta)
        except Exception as exc:
            return f"{type(exc).__module__}.{type(exc).__name__} raised", str(exc)
    return f"CallToolResult(isError={result.isError})", text_of(result)


async def as_agent_tool(server: Any, args: dict[str, Any], watch: smoke.Watch) -> tuple[str, str]:
    from agents.mcp.util import MCPUtil
    from agents.tool_context import ToolContext

    tools = {t.name: t for t in await server.list_tools()}
    function_tool = MCPUtil.to_function_tool(tools["broadcast_alert"], server,
                                             convert_schemas_to_strict=False)
    raw = json.dumps(args)
    ctx = ToolContext(context=None, tool_name=function_tool.name, tool_call_id="call_smoke",
                      tool_arguments=raw)
    with watch.observe():
        try:
            out = await function_tool.on_invoke_tool(ctx, raw)
        except Exception as exc:
            return f"{type(exc).__module__}.{type(exc).__name__} raised", str(exc)
    return "FunctionTool output (the model's tool message)", str(out)


async def run(ep: smoke.Endpoint, wait: float, report: smoke.Report) -> None:
    from agents.mcp import MCPServerStreamableHttp

    op = smoke.Operator(ep.base_url, ep.state_dir)
    params = {"url": ep.mcp_url, "headers": ep.headers}
    longer = wait + 30
    watches: list[smoke.Watch] = []

    async def on_message(message: Any) -> None:  # must never raise: it runs in the receive loop
        if not watches:
            return
        root = getattr(message, "root", None)
        p = getattr(root, "params", None)
        if getattr(root, "method", "") == "notifications/progress" and p is not None:
            watches[-1].add("message_handler", f"notifications/progress token={p.progressToken} "
                                               f"progress={p.progress} total={p.total} message={p.message}")
        else:  # e.g. RuntimeError('Received response with an unknown request ID: …') for a call
            watches[-1].add("message_handler", repr(message)[:400])  # that timed out on our side

    # 1. the SDK's defaults: client_session_timeout_seconds=5
    args = smoke.risky_args(CLIENT + " (default timeout)")
    async with MCPServerStreamableHttp(params=params, message_handler=on_message) as server:
        report.restart_clock()
        names = sorted(t.name for t in await server.list_tools())
        report.step("list", {"get_forecast", "broadcast_alert"} <= set(names), names)
        forecast = await server.call_tool("get_forecast", smoke.SAFE_ARGS)
        report.step("safe call", smoke.SAFE_RESULT in text_of(forecast), text_of(forecast))

        watches.append(smoke.Watch("default client_session_timeout_seconds=5"))
        outcome, answer = await risky(server, args, watches[-1])
        report.wait(watches[-1], outcome, answer, timeout_seconds=5)
        report.step("risky call, default timeout (5 s)", True, {"outcome": outcome, "answer": answer},
                    seconds=watches[-1].seconds)
        # the same call as an agent makes it (the SDK's FunctionTool for an MCP tool): what the
        # model is told and what the console shows; it joins the same pending request
        watches.append(smoke.Watch("default timeout, as an agent's tool (MCPUtil.to_function_tool)"))
        outcome, answer = await as_agent_tool(server, args, watches[-1])
        report.wait(watches[-1], outcome, answer, timeout_seconds=5)
        report.step("risky call as an agent's tool, default timeout", True,
                    {"outcome": outcome, "model gets": answer}, seconds=watches[-1].seconds)
        # the request outlives the client's give-up: a person finds it in the inbox
        card = op.find_pending("broadcast_alert", args, timeout=wait + 5)
        report.step("request still pending after the client gave up", card["state"] == "pending",
                    {"id": card["id"], "state": card["state"]}, seconds=0)
        t = time.monotonic()
        decided = op.approve(card["id"])
        report.step("decision (operator API)", decided["state"] == "approved",
                    {"id": card["id"], "state": decided["state"]}, seconds=time.monotonic() - t)
        report.restart_clock()
        again = await server.call_tool("broadcast_alert", args)  # same session, same arguments
        report.step("result (after a timed-out call)", smoke.RISKY_RESULT in text_of(again), text_of(again))
        smoke.check_ran_once(op, card["id"], report)

    # 2. a session timeout longer than serve's wait
    args = smoke.risky_args(CLIENT + f" (timeout {longer:g})")
    async with MCPServerStreamableHttp(params=params, client_session_timeout_seconds=longer,
                                       message_handler=on_message) as server:
        watches.append(smoke.Watch(f"client_session_timeout_seconds={longer:g}"))
        outcome, answer = await risky(server, args, watches[-1])
        request_id = smoke.request_id_in(answer)
        report.wait(watches[-1], outcome, answer, timeout_seconds=longer, request_id=request_id)
        report.step(f"risky call waits, then answers pending (timeout {longer:g} s)", request_id is not None,
                    {"outcome": outcome, "answer": answer}, seconds=watches[-1].seconds)
        assert request_id is not None
        watches.append(smoke.Watch(f"timeout {longer:g}, as an agent's tool (MCPUtil.to_function_tool)"))
        outcome, answer = await as_agent_tool(server, args, watches[-1])
        report.wait(watches[-1], outcome, answer, timeout_seconds=longer)
        report.step("risky call as an agent's tool, longer timeout", request_id in answer,
                    {"outcome": outcome, "model gets": answer}, seconds=watches[-1].seconds)
        t = time.monotonic()
        decided = op.approve(request_id)
        report.step("decision (operator API)", decided["state"] == "approved",
                    {"id": request_id, "state": decided["state"]}, seconds=time.monotonic() - t)
        report.restart_clock()
        again = await server.call_tool("broadcast_alert", args)
        report.step("result", smoke.RISKY_RESULT in text_of(again), text_of(again))
        smoke.check_ran_once(op, request_id, report)

        # 3. the same, with a progress token the SDK does not send by itself
        args3 = smoke.risky_args(CLIENT + " (progressToken in _meta)")
        watches.append(smoke.Watch(f"timeout {longer:g} + meta={{'progressToken': …}} + message_handler"))
        outcome, answer = await risky(server, args3, watches[-1], meta={"progressToken": "tk-smoke-1"})
        report.wait(watches[-1], outcome, answer, request_id=smoke.request_id_in(answer))
        heard = [e for e in watches[-1].events if e["via"] == "message_handler"]
        report.step("with _meta.progressToken: message_handler hears progress", bool(heard),
                    {"notifications": len(heard)}, seconds=watches[-1].seconds)

    # 4. a decision that lands after the SDK gave up but before serve stopped waiting
    await late_approval(ep, wait, report, watches, on_message)


async def late_approval(ep: smoke.Endpoint, wait: float, report: smoke.Report, watches: list[smoke.Watch],
                        on_message: Any) -> None:
    """The SDK gives up after 5 s; serve still waits (up to its --approval-wait); a person approves
    in between, which is when people approve. The promise: "a call whose client gave up loses
    nothing: the decision is kept and the same call made again takes it"."""
    from agents.mcp import MCPServerStreamableHttp

    if wait < 6:
        report.note(f"late-approval check skipped: serve's wait ({wait:g} s) leaves no time after 5 s")
        return
    op = smoke.Operator(ep.base_url, ep.state_dir)
    args = smoke.risky_args(CLIENT + " (late approval)")
    approve_at = 5 + (wait - 5) / 2
    async with MCPServerStreamableHttp(params={"url": ep.mcp_url, "headers": ep.headers},
                                       message_handler=on_message) as server:
        watches.append(smoke.Watch(f"default 5 s timeout; the operator approves at {approve_at:g} s, "
                                   f"while serve still waits ({wait:g} s)"))
        watch = watches[-1]
        outcome, answer = await risky(server, args, watch)
        await asyncio.sleep(max(0.0, approve_at - (time.monotonic() - watch.t0)))
        card = op.find_pending("broadcast_alert", args)
        decided = op.approve(card["id"])
        watch.add("operator", f"approved {card['id']}: {decided['state']}")
        await asyncio.sleep(max(0.0, wait + 1 - (time.monotonic() - watch.t0)))
        after = op.get(card["id"])
        watch.add("operator", f"{card['id']} is now {after['state']}, result {after.get('result')}")
        report.wait(watch, outcome, answer, timeout_seconds=5)
        t = time.monotonic()
        try:
            again = await server.call_tool("broadcast_alert", args)
            got = text_of(again)
        except Exception as exc:
            got = f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
        pending = [r["id"] for r in op.pending() if smoke.same_arguments(r["arguments"], args)]
        runs = [e["call_id"] for e in op.audit()
                if e.get("approval_id") == card["id"] and e["status"] == "ok"]
        report.finding("late approval: the same call made again gets the result", smoke.RISKY_RESULT in got, {
            "approved": card["id"], "its state before the call again": after["state"],
            "ran in (audit)": runs, "the call again answered": got, "new pending requests": pending},
            seconds=time.monotonic() - t)


def main() -> int:
    opts = smoke.arguments()
    versions = f"openai-agents {smoke.pkg_version('openai-agents')}, mcp {smoke.pkg_version('mcp')}"
    report = smoke.Report(CLIENT, "openai-agents agents.mcp.MCPServerStreamableHttp", versions)
    try:
        with smoke.endpoint(opts.approval_wait) as (ep, wait):
            asyncio.run(run(ep, wait, report))
    except Exception as exc:
        report.step("error", False, f"{type(exc).__name__}: {exc}")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
