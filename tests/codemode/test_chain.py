"""Code mode with the real sandbox: scripts that pipe tools into each other, every call through
the invoker (budget, approval, allowed set), the trace kept through crashes and kills, and the
sandbox holding against escape attempts."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from toolkeeper import Toolbox, ToolInvoker, ToolRisk, tool
from toolkeeper.codemode import ToolChainTool
from toolkeeper.invoke import ChainPolicy
from toolkeeper.invoke.audit import SqliteAuditLog

pytestmark = pytest.mark.anyio
SENT: list[str] = []


@tool
def get_weather(city: str) -> dict:  # type: ignore[type-arg]
    """Weather for a city."""
    return {"city": city, "temp": 21}


@tool
def shout(text: str) -> str:
    """Upper-case text."""
    return text.upper()


@tool(risk=ToolRisk.CRITICAL)
def send_email(to: str, body: str) -> str:
    """Send an email (needs approval)."""
    SENT.append(to)
    return f"sent to {to}"


def chain(**options: object) -> ToolChainTool:
    return ToolChainTool(ToolInvoker([get_weather, shout, send_email]), **options)  # type: ignore[arg-type]


async def test_a_script_pipes_one_tool_into_another_and_returns_a_value() -> None:
    run = await chain().run_chain(
        "w = get_weather(city='Lisbon')\nprint('temp', w.structured['temp'])\n"
        "result = shout(text=w.structured['city']).text")
    assert run.status == "ok" and run.value == "LISBON" and run.output_text == "temp 21\n"
    assert [(r.tool, r.status) for r in run.call_trace] == [("get_weather", "ok"),
                                                            ("shout", "ok")]


async def test_the_description_lists_the_callable_tools_as_signatures() -> None:
    text = chain(tools=["get_weather"]).description
    assert "def get_weather(city: str) -> Result:" in text and "shout" not in text


async def test_a_run_that_uses_up_its_budget_ends_with_every_call_recorded_once(
        tmp_path: Path) -> None:
    audit = SqliteAuditLog(tmp_path / "audit.db")
    tool = ToolChainTool(ToolInvoker([get_weather], audit=audit),
                         policy=ChainPolicy(max_tool_calls=3))
    run = await tool.run_chain(  # it would go on refused, recorded one by one, for 10,000 calls
        "results = [get_weather(city=str(i)).status for i in range(10_000)]\nresult = results")
    assert run.status == "error" and "whole budget of 3 tool calls" in run.output_text
    assert run.value is None
    assert [(r.tool, r.status, r.error_code) for r in run.call_trace] == [
        ("get_weather", "ok", None)] * 3 + [("get_weather", "error", "budget_exceeded")]
    assert len(audit.query(limit=1000)) == 4


async def test_searches_count_against_the_budget_and_are_recorded(tmp_path: Path) -> None:
    audit = SqliteAuditLog(tmp_path / "audit.db")
    tool = ToolChainTool(ToolInvoker([get_weather, shout], audit=audit),
                         policy=ChainPolicy(max_tool_calls=4))
    run = await tool.run_chain(
        "first = search_tools('weather in a city')\n"
        "w = get_weather(city='Oslo').status\n"
        "for _ in range(100_000):\n    search_tools('upper case')\nresult = first")
    assert run.status == "error" and "budget of 4" in run.output_text
    assert [(r.tool, r.status) for r in run.call_trace] == [
        ("search_tools", "ok"), ("get_weather", "ok"), ("search_tools", "ok"),
        ("search_tools", "ok"), ("search_tools", "error")]
    assert run.call_trace[-1].error_code == "budget_exceeded"
    entries = audit.query(limit=1000)
    assert sorted(e.tool for e in entries) == ["get_weather"] + ["search_tools"] * 4
    assert {e.arguments.get("query") for e in entries if e.tool == "search_tools"} == {
        "weather in a city", "upper case"}


async def test_approval_denied_inside_a_script_and_tools_outside_the_set_refused() -> None:
    SENT.clear()
    invoker = ToolInvoker([get_weather, shout, send_email])
    chain_tool = ToolChainTool(invoker, tools=["get_weather", "send_email"])
    assert isinstance(invoker.registry, Toolbox)
    invoker.registry.add(chain_tool)  # the chain is in its own catalog: still not callable
    run = await chain_tool.run_chain(
        "a = send_email(to='eve@example.com', body='hi')\n"
        "b = call_tool('tool_chain', {'code': 'print(1)'})\n"
        "c = call_tool('shout', {'text': 'x'})\n"
        "d = call_tool('rm_rf', {})\n"
        "result = [(r.status, r.error_code) for r in (a, b, c, d)] + [b.text]")
    assert SENT == []
    assert cast(Any, run.value)[:4] == [["denied", "denied"], ["denied", "policy_violation"],
                             ["denied", "policy_violation"], ["error", "unknown_tool"]]
    assert "'tool_chain' is not callable in this session" in cast(Any, run.value)[4]
    assert [(r.tool, r.status) for r in run.call_trace] == [
        ("send_email", "denied"), ("tool_chain", "denied"), ("shout", "denied"),
        ("rm_rf", "error")]  # refused attempts are in the trace like any call


async def test_a_crash_after_two_calls_keeps_both_in_the_trace() -> None:
    run = await chain().run_chain(
        "get_weather(city='A')\nget_weather(city='B')\nraise RuntimeError('boom')")
    assert run.status == "error" and "boom" in run.output_text
    assert [r.status for r in run.call_trace] == ["ok", "ok"]


async def test_the_total_time_limit_kills_the_sandbox_and_keeps_the_trace() -> None:
    run = await chain(policy=ChainPolicy(total_timeout_s=2, call_timeout_s=1,
                                         approval_timeout_s=0.5)).run_chain(
        "get_weather(city='A')\nimport time\ntime.sleep(30)")
    assert run.status == "timeout" and run.duration_ms < 15_000
    assert [r.tool for r in run.call_trace] == ["get_weather"]


async def test_host_files_network_and_processes_stay_out_of_reach(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    script = f"""
import os, socket, subprocess
found = {{}}
for path in ({str(secret)!r}, '/etc/shadow', '/root/.bashrc', '/proc/1/environ'):
    try:
        found[path] = open(path).read()[:20]
    except Exception as exc:
        found[path] = type(exc).__name__
try:
    socket.create_connection(('1.1.1.1', 53), timeout=2)
    found['net'] = 'connected'
except Exception as exc:
    found['net'] = type(exc).__name__
found['env'] = sorted(k for k in os.environ if 'BRIDGE' in k)
found['pid1'] = open('/proc/1/cmdline').read()
result = found
"""
    run = await chain().run_chain(script)
    assert run.status == "ok", run.output_text
    found = cast(Any, run.value)
    assert found[str(secret)] != "host secret" and found["/etc/shadow"] != ""
    assert found["net"] != "connected"
    assert found["env"] == []  # the bridge's fd and secret left the environment
    assert found["pid1"].startswith("bwrap")  # a private process tree: pid 1 is the sandbox
    assert "SECRET" not in found["pid1"]  # the run's secret is on no command line


async def test_floods_and_fork_bombs_are_contained_and_nothing_survives_a_run() -> None:
    flood = await chain().run_chain("print('x' * 10_000_000)")
    assert len(flood.output_text) <= 70_000
    bomb = await chain(policy=ChainPolicy(total_timeout_s=5)).run_chain(
        "import os\nfor _ in range(200):\n    try:\n        os.fork()\n    except OSError:\n"
        "        break\nresult = 'done'")
    assert bomb.status in ("ok", "error", "timeout", "killed")
    first = await chain().run_chain("open('/tmp/left', 'w').write('x')\nresult = 1")
    second = await chain().run_chain("import os\nresult = os.path.exists('/tmp/left')")
    assert first.value == 1 and second.value is False


async def test_the_chain_is_a_tool_the_invoker_can_run() -> None:
    invoker = ToolInvoker([get_weather])
    chain_tool = ToolChainTool(invoker)
    outer = ToolInvoker([chain_tool])
    async with outer.open_session() as session:
        from toolkeeper.core.call import ToolCall
        result = await outer.invoke(ToolCall(id="c", name="tool_chain", arguments={
            "code": "result = get_weather(city='Oslo').structured"}), session=session)
    assert result.ok and "Oslo" in result.text


async def test_a_large_result_stays_on_the_host_and_is_passed_on_by_reference() -> None:
    from toolkeeper.artifacts import MemoryBlobStore

    @tool
    def big_report(rows: int) -> str:
        """A big report."""
        return "\n".join(f"row {i} " + "x" * 50 for i in range(rows))

    @tool
    def count_lines(text: str) -> int:
        """Count lines."""
        return len(text.splitlines())

    invoker = ToolInvoker([big_report, count_lines], artifact_store=MemoryBlobStore())
    run = await ToolChainTool(invoker).run_chain(
        "r = big_report(rows=5000)\n"
        "c = count_lines(text={'$artifact': r.artifact_ref})\n"
        "result = [r.artifact_ref is not None, len(r.text) < 10_000, c.structured]")
    assert run.value == [True, True, {"result": 5000}]  # 300 KB never entered the sandbox


# A script's way to the bridge behind the prelude's back: the first socket among its fds.
FIND_BRIDGE = """
import os, socket, struct, json
for fd in map(int, os.listdir('/proc/self/fd')):
    try:
        sock = socket.socket(fileno=os.dup(fd))
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE)
    except OSError:
        continue
"""


async def test_forged_and_flooding_frames_end_the_bridge_without_running_anything() -> None:
    SENT.clear()
    forge = FIND_BRIDGE + """
    data = json.dumps({"type": "call", "id": 99, "tool": "send_email",
                       "arguments": {"to": "x@evil", "body": "b"}}).encode()
    sock.sendall(struct.pack(">I", len(data)) + data)
    break
result = get_weather(city='A').status
"""
    forged = await chain().run_chain(forge)
    assert forged.status == "error" and "secret" in forged.output_text
    assert SENT == [] and forged.call_trace == ()
    flood = FIND_BRIDGE + """
    sock.sendall(struct.pack(">I", 2**31) + b"x" * 1000)
    break
result = get_weather(city='A').status
"""
    flooded = await chain().run_chain(flood)
    assert flooded.status == "error" and "limit" in flooded.output_text


async def test_replacing_the_prelude_functions_cannot_forge_a_call() -> None:
    run = await chain().run_chain(
        "call_tool = lambda *a, **k: 'sent'\nget_weather = lambda **k: 'fake'\n"
        "result = [call_tool('send_email', {}), get_weather(city='x')]")
    assert run.value == ["sent", "fake"] and run.call_trace == ()  # nothing reached the host


async def test_a_slow_call_is_cut_at_the_per_call_limit_inside_a_script() -> None:
    @tool
    async def slow(seconds: float) -> str:
        """Sleep."""
        import anyio
        await anyio.sleep(seconds)
        return "slept"

    run = await ToolChainTool(ToolInvoker([slow]), policy=ChainPolicy(
        call_timeout_s=1, approval_timeout_s=0.5)).run_chain(
        "r = slow(seconds=20)\nresult = [r.status, r.error_code]")
    assert run.status == "ok" and cast(Any, run.value)[0] in ("error", "timeout") and run.duration_ms < 10_000
    assert run.call_trace[0].error_code == "timeout"


async def test_a_frame_the_host_cannot_read_ends_the_run_with_its_trace_kept() -> None:
    SENT.clear()
    forge = """
first = get_weather(city='A').status
""" + FIND_BRIDGE + """
    data = json.dumps({"type": "call", "secret": "s\\u00e9cr\\u00e8t\\ud800", "tool": "send_email",
                       "arguments": {"to": "x@evil", "body": "b"}}).encode()
    sock.sendall(struct.pack(">I", len(data)) + data)
    break
result = get_weather(city='B').status
"""
    run = await chain().run_chain(forge)  # the host side raised on this frame before
    assert run.status == "error" and "without the run's secret" in run.output_text
    assert [c.tool for c in run.call_trace] == ["get_weather"]  # the call that ran is kept
    assert SENT == []
