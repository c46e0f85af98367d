"""The MCP server with the official client: in-process, and over stdio against a real server
process. Every tools/call goes through the invoker."""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp_types.methods import serialize_server_result
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from toolkeeper import Toolbox, ToolCall, ToolContext, ToolInvoker, ToolResult, ToolRisk, tool
from toolkeeper.core.results import AudioBlock, FileBlock, ImageBlock, JsonBlock, ResourceLinkBlock, TextBlock
from toolkeeper.mcp.server import MCPFace, mcp_server

from ..blocks import text_of

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.anyio


@tool
def forecast(city: str, days: int = 1) -> dict:  # type: ignore[type-arg]
    """Get the forecast for a city.

    Args:
        city: City name.
        days: How many days ahead.
    """
    return {"city": city, "days": days, "summary": "sunny"}


@tool(risk=ToolRisk.HIGH)
def wipe(path: str) -> str:
    """Remove a path."""
    return "wiped"


async def test_tools_are_listed_from_the_catalog_in_the_mcp_shape() -> None:
    async with Client(mcp_server(ToolInvoker([wipe, forecast]))) as client:
        listed = await client.list_tools()
    assert [t.name for t in listed.tools] == ["forecast", "wipe"]
    by_name = {t.name: t for t in listed.tools}
    assert by_name["forecast"].input_schema["required"] == ["city"]
    assert by_name["forecast"].output_schema is not None
    assert by_name["wipe"].annotations is not None and by_name["wipe"].annotations.destructive_hint


async def test_calls_go_through_the_invoker_and_failures_are_error_results() -> None:
    invoker = ToolInvoker([wipe, forecast])
    session = invoker.open_session()
    async with Client(mcp_server(invoker, session=session)) as client:
        ok = await client.call_tool("forecast", {"city": "Lisbon"})
        invalid = await client.call_tool("forecast", {"days": "many"})
        denied = await client.call_tool("wipe", {"path": "/"})
        unknown = await client.call_tool("forcast", {})
    assert not ok.is_error and ok.structured_content == {"city": "Lisbon", "days": 1,
                                                         "summary": "sunny"}
    assert invalid.is_error and "missing required argument 'city'" in text_of(invalid.content[0])
    assert denied.is_error and "needs approval" in text_of(denied.content[0])
    assert unknown.is_error and "did you mean 'forecast'" in text_of(unknown.content[0])
    assert [(r.tool, r.status) for r in session.trace] == [
        ("forecast", "ok"), ("forecast", "error"), ("wipe", "denied"), ("forcast", "error")]


async def test_a_real_server_process_over_stdio(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    params = StdioServerParameters(command=sys.executable,
                                   args=[str(HERE / "stdio_server.py"), str(log)])
    async with Client(params) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        added = await client.call_tool("add", {"a": 2, "b": 3})
        refused = await client.call_tool("delete_everything", {"path": "/"})
    assert names == ["add", "crunch", "delete_everything", "grow"]
    assert added.structured_content == {"result": 5} and not added.is_error
    assert refused.is_error and "needs approval" in text_of(refused.content[0])
    assert log.read_text() == "add\n"  # the denied tool never ran


async def test_skills_are_offered_as_prompts() -> None:
    from mcp.shared.exceptions import MCPError

    from toolkeeper import Skill

    notes = Skill(name="release-notes", description="Write release notes.",
                  instructions="Read the log since the last tag, then group the changes.")
    async with Client(mcp_server(ToolInvoker([forecast]), skills=[notes])) as client:
        prompts = (await client.list_prompts()).prompts
        prompt = await client.get_prompt("release-notes")
        try:
            await client.get_prompt("nope")
        except MCPError as exc:
            missing = str(exc)
        else:
            missing = ""
    assert [(p.name, p.description) for p in prompts] == [("release-notes",
                                                           "Write release notes.")]
    assert "Read the log since the last tag" in text_of(prompt.messages[0].content)
    assert "no prompt named 'nope'" in missing and "release-notes" in missing


async def test_a_tool_returning_text_keeps_the_promise_of_its_output_schema() -> None:
    """MCP clients reject a result whose tool declares an output schema but that carries no
    structured content: a ``-> str`` tool answers with both."""

    @tool
    def greet(name: str) -> str:
        """Greet someone."""
        return f"hello {name}"

    async with Client(mcp_server(ToolInvoker([greet]))) as client:
        (listed,) = (await client.list_tools()).tools
        result = await client.call_tool("greet", {"name": "Ada"})
    assert listed.output_schema is not None
    assert result.structured_content == {"result": "hello Ada"}
    assert text_of(result.content[0]) == "hello Ada"


async def test_tools_added_or_removed_after_the_server_was_built_are_seen() -> None:
    from toolkeeper.toolbox import Toolbox

    box = Toolbox([forecast])
    async with Client(mcp_server(ToolInvoker(box))) as client:
        await client.call_tool("forecast", {"city": "Lisbon"})  # the name table is now cached

        @tool
        def late(x: int) -> int:
            """Added after the server started."""
            return x * 2

        box.add(late)
        added = await client.call_tool("late", {"x": 21})
        box.remove("forecast")
        gone = await client.call_tool("forecast", {"city": "Lisbon"})
    assert not added.is_error and added.structured_content == {"result": 42}
    assert gone.is_error and "unknown tool" in text_of(gone.content[0]).lower()


async def test_tools_list_is_paged_in_name_order_with_an_opaque_cursor() -> None:
    from mcp.shared.exceptions import MCPError

    @tool
    def alpha() -> str:
        """A."""
        return "a"

    async with Client(mcp_server(ToolInvoker([wipe, forecast, alpha]), page_size=2)) as client:
        first = await client.list_tools()
        second = await client.list_tools(cursor=first.next_cursor)
        with pytest.raises(MCPError, match="invalid cursor"):
            await client.list_tools(cursor="%%%not-a-cursor")
        for guessed in ("AAAA", "enVa", base64.urlsafe_b64encode(b"forecast").decode()):
            with pytest.raises(MCPError, match="invalid cursor"):  # base64, not ours
                await client.list_tools(cursor=guessed)
    assert [t.name for t in first.tools] == ["alpha", "forecast"] and first.next_cursor
    assert [t.name for t in second.tools] == ["wipe"] and second.next_cursor is None


async def test_progress_reaches_the_client_and_a_cancelled_request_cancels_the_call() -> None:

    finished: list[str] = []

    @tool
    async def crunch(steps: int, ctx: ToolContext) -> str:
        """Crunch numbers, reporting progress."""
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step}")
        if steps > 3:
            await anyio.sleep(30)
        finished.append("crunch")
        return "done"

    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    invoker = ToolInvoker([crunch])
    session = invoker.open_session()
    async with Client(mcp_server(invoker, session=session)) as client:
        done = await client.call_tool("crunch", {"steps": 3}, progress_callback=on_progress)
        with anyio.move_on_after(1):
            await client.call_tool("crunch", {"steps": 4})
        await anyio.sleep(0.2)
    assert text_of(done.content[0]) == "done"
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert finished == ["crunch"]  # the cancelled call never finished
    assert [(r.status, r.error_code) for r in session.trace] == [
        ("ok", None), ("error", "cancelled")]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_clients_are_told_when_the_catalog_changes(mode: str) -> None:
    import mcp_types as types

    from toolkeeper.mcp.server import announce_changes
    from toolkeeper.toolbox import Toolbox

    box = Toolbox([forecast])
    server = mcp_server(ToolInvoker(box))
    told = anyio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            told.set()

    @tool
    def late(x: int) -> int:
        """Added later."""
        return x

    async with anyio.create_task_group() as group:
        # a Toolbox announces its changes: heard at once, never polled (an hour's poll)
        group.start_soon(announce_changes, server, box, 3600)
        async with Client(server, mode=mode, message_handler=on_message) as client:
            await client.list_tools()
            if mode == "legacy":
                box.add(late)
                with anyio.fail_after(5):
                    await told.wait()
            else:  # 2026-07-28: change events come on a subscriptions/listen stream
                async with client.listen(tools_list_changed=True) as events:
                    box.add(late)
                    with anyio.fail_after(5):
                        async for _event in events:
                            break
            names = [t.name for t in (await client.list_tools()).tools]
        group.cancel_scope.cancel()
    assert names == ["forecast", "late"]


async def test_no_path_but_the_invoker_runs_a_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every execution over MCP happens inside ToolInvoker.invoke, once per tools/call."""
    import contextvars

    from toolkeeper.tools.tool import Tool

    inside = contextvars.ContextVar("inside", default=False)
    invokes: list[str] = []
    runs: list[tuple[str, bool]] = []
    real_invoke, real_call = ToolInvoker.invoke, Tool.call_async

    async def invoke(self: ToolInvoker, call: object, **kwargs: object) -> object:
        invokes.append(call.name)  # type: ignore[attr-defined]
        token = inside.set(True)
        try:
            return await real_invoke(self, call, **kwargs)  # type: ignore[arg-type]
        finally:
            inside.reset(token)

    async def call_async(self: Tool, *args: object, **kwargs: object) -> object:
        runs.append((self.name, inside.get()))
        return await real_call(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ToolInvoker, "invoke", invoke)
    monkeypatch.setattr(Tool, "call_async", call_async)
    async with Client(mcp_server(ToolInvoker([wipe, forecast]))) as client:
        await client.call_tool("forecast", {"city": "Porto"})
        await client.call_tool("wipe", {"path": "/"})
        await client.call_tool("forecast", {"days": 2})
    assert invokes == ["forecast", "wipe", "forecast"]
    assert runs == [("forecast", True)]  # one ran, inside the door; the others were refused


async def test_progress_cancellation_and_change_notifications_over_stdio(tmp_path: Path) -> None:
    import mcp_types as types

    log = tmp_path / "calls.log"
    params = StdioServerParameters(command=sys.executable,
                                   args=[str(HERE / "stdio_server.py"), str(log)])
    seen: list[float] = []
    told = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async def on_message(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            told.set()

    async with Client(params, mode="legacy", message_handler=on_message) as client:
        done = await client.call_tool("crunch", {"steps": 3}, progress_callback=on_progress)
        with anyio.move_on_after(1):
            await client.call_tool("crunch", {"steps": 4})
        await client.call_tool("grow", {})
        with anyio.fail_after(10):
            await told.wait()
        names = [t.name for t in (await client.list_tools()).tools]
        await anyio.sleep(0.5)
    assert text_of(done.content[0]) == "crunched" and seen == [1, 2, 3]
    assert "late" in names
    assert log.read_text() == "crunch\n"  # the cancelled call never finished


async def test_a_skill_with_arguments_is_a_prompt_to_fill_and_its_file_a_resource(
        tmp_path: Path) -> None:
    from toolkeeper.skills import load_skill

    file = tmp_path / "SKILL.md"
    file.write_text("---\nname: triage\ndescription: Triage a ticket.\narguments: [ticket, team]"
                    "\n---\nRead ticket {ticket} and hand it to {team}.\n")
    skill = load_skill(file)
    async with Client(mcp_server(ToolInvoker([forecast]), skills=[skill])) as client:
        listed = (await client.list_prompts()).prompts
        filled = await client.get_prompt("triage", {"ticket": "T-7", "team": "billing"})
        read = (await client.read_resource("toolkeeper://skill/triage")).contents[0]
    assert skill.arguments == ("ticket", "team")
    assert [(a.name, a.required) for a in listed[0].arguments or []] == [
        ("ticket", True), ("team", True)]
    assert "Read ticket T-7 and hand it to billing." in filled.messages[0].content.text  # type: ignore[union-attr]
    assert read.text == file.read_text()  # type: ignore[union-attr]


async def test_a_caller_limited_to_some_tools_lists_and_calls_only_those_code_mode_included(
        ) -> None:
    from toolkeeper.codemode import ToolChainTool
    from toolkeeper.core.context import Caller

    invoker = ToolInvoker([wipe, forecast])
    assert isinstance(invoker.registry, Toolbox)
    invoker.registry.add(ToolChainTool(invoker))
    everything = ToolChainTool(invoker).description
    limited = Caller(client="oauth:agent", channel="mcp", tools=("forecast", "tool_chain"))
    session = invoker.open_session(caller=limited)
    async with Client(mcp_server(invoker, session=session)) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        refused = await client.call_tool("wipe", {"path": "/"})
    assert sorted(listed) == ["forecast", "tool_chain"]
    described = listed["tool_chain"].description or ""
    assert "def forecast(" in described and "wipe" not in described and "wipe" in everything
    assert refused.is_error and "not among the tools client 'oauth:agent' may call" in \
        text_of(refused.content[0])


async def test_the_face_runs_a_call_without_the_wire_and_stop_calls_ends_it() -> None:
    """``call_tool`` only reads and writes the wire: the call itself is the face's
    ``parse_call`` and ``run_call``, which a server stopping cancels (``None``)."""


    started = anyio.Event()

    @tool
    async def slow(seconds: float) -> str:
        """Wait."""
        started.set()
        await anyio.sleep(seconds)
        return "done"

    invoker = ToolInvoker([forecast, slow])
    session = invoker.open_session()
    face = MCPFace(invoker, session=session)
    call = await face.parse_call("forecast", {"city": "Lisbon"})
    result = await face.run_call(call, session, ToolContext(call_id=call.id,
                                                            tool_name=call.name))
    assert not isinstance(result, str) and result is not None and result.status == "ok"
    assert "Lisbon" in result.to_tool_result().text
    waiting = await face.parse_call("slow", {"seconds": 60})
    outcomes: list[object] = []

    async def run() -> None:
        outcomes.append(await face.run_call(waiting, session, ToolContext(call_id=waiting.id)))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await started.wait()
        assert face.stop_calls() == 1
    assert outcomes == [None]


async def test_one_export_per_catalog_version_serves_listing_calls_schemas_and_names(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The catalog's MCP export is made in one place: the listing, a call, the SDK's input
    schema lookup (handed to the server it builds) and the gate's tool names all read it."""
    box = Toolbox([forecast, wipe])
    exports: list[str] = []
    export = box.export

    def counted(fmt: str, **kw: Any) -> Any:
        exports.append(fmt)
        return export(fmt, **kw)

    monkeypatch.setattr(box, "export", counted)
    face = MCPFace(ToolInvoker(box))
    assert face.listing()[1] == ["forecast", "wipe"]
    schema = face.server.get_tool_input_schema
    assert schema is not None
    found = schema("forecast")
    assert found is not None and found["required"] == ["city"]
    assert face.exported.tool_name("wipe") == "wipe"
    assert (await face.parse_call("forecast", {"city": "Porto"})).name == "forecast"
    assert exports == ["mcp"]
    assert face.exported.tool_name("nope") is None  # unknown: exported again, in case
    box.remove("wipe")  # a new version: exported again, once
    assert face.listing()[1] == ["forecast"] and schema("forecast") is not None
    assert exports == ["mcp", "mcp", "mcp"]


async def test_a_calls_result_is_handed_to_the_sdk_as_the_wire_dict_it_checks_once() -> None:
    """The SDK validates and dumps a handler's result for the client's protocol version; a
    model built here first was validated and dumped twice for the same bytes."""
    invoker = ToolInvoker(Toolbox([forecast]))
    face = MCPFace(invoker)
    call = ToolCall(id="c1", name="forecast", arguments={"city": "Porto"})
    async with invoker.open_session() as session:
        outcome = await invoker.invoke(call, session=session)
    rendered = face.rendered(call, outcome)
    assert type(rendered) is dict
    as_model = types.CallToolResult.model_validate(rendered)
    assert rendered == as_model.model_dump(by_alias=True, mode="json", exclude_none=True)


@tool
def shown(kind: str) -> Any:
    """Every kind of content a tool can hand back."""
    if kind == "text":
        return "héllo — ✓"
    if kind == "none":
        return None
    if kind == "list":
        return [1, "two", {"three": 3}]
    if kind == "raise":
        raise RuntimeError("the disk is full")
    blocks = {
        "image": ImageBlock.from_bytes(b"\x89PNG", "image/png"),
        "audio": AudioBlock.from_bytes(b"RIFF", "audio/wav"),
        "file_text": FileBlock(name="a.txt", text="plain", media_type="text/plain"),
        "file_data": FileBlock(name="a.bin", data="AAE=", media_type="application/octet-stream"),
        "link": ResourceLinkBlock(uri="file:///a.txt", name="a.txt", media_type="text/plain",
                                  size=5, description="a file"),
        "json": JsonBlock(data={"k": [1, None, True]}),
    }
    return ToolResult(content=(TextBlock(text="with"), blocks[kind]),
                      structured_content={"kind": kind})


@pytest.mark.parametrize("kind", ["text", "none", "list", "raise", "image", "audio",
                                  "file_text", "file_data", "link", "json", "high"])
async def test_every_kind_of_result_is_handed_to_the_sdk_as_a_dict_its_model_keeps_whole(
        kind: str) -> None:
    """The face's result dict is checked only by the SDK (once, for the client's version): it
    must be exactly what the SDK's model holds — no field the model drops, renames or refuses
    — and valid for every protocol version the SDK speaks."""
    invoker = ToolInvoker(Toolbox([shown, wipe]))
    face = MCPFace(invoker)
    call = (ToolCall(id="c1", name="wipe", arguments={"path": "/x"}) if kind == "high"
            else ToolCall(id="c1", name="shown", arguments={"kind": kind}))
    async with invoker.open_session() as session:
        outcome = await invoker.invoke(call, session=session)
    rendered = face.rendered(call, outcome)
    assert rendered["isError"] is (kind in ("raise", "high")), rendered
    as_model = types.CallToolResult.model_validate(rendered)
    assert rendered == as_model.model_dump(by_alias=True, mode="json", exclude_none=True)
    for version in (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS):
        wire = serialize_server_result("tools/call", version, rendered)
        assert len(wire["content"]) == len(rendered["content"]), (version, wire)
        assert wire.get("isError") == rendered["isError"], version
