"""A client's trace continued by a real ``toolkeeper serve``: its tools module sets up the
OpenTelemetry SDK (as a user would), the official MCP client sends W3C trace context in the
HTTP headers and in ``_meta`` (SEP-414), and the spans the server exported are read back. The
MCP SDK's own ``tools/call`` span continues ``_meta``; toolkeeper continues the header, and its
``execute_tool`` span is the child of the SDK's."""

from __future__ import annotations

import json
import signal
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from ..blocks import text_of
from ..processes import no_traceback
from .test_serve import CLIENT_TOKENS, _start

pytestmark = pytest.mark.anyio

HEADER_TRACE, HEADER_PARENT = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
META_TRACE, META_PARENT = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"

TOOLS = '''
import json
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from toolkeeper import tool

class ToFile(SpanExporter):
    def export(self, spans):
        with open(SPANS, "a") as out:
            for s in spans:
                out.write(json.dumps({
                    "name": s.name, "trace_id": format(s.context.trace_id, "032x"),
                    "span_id": format(s.context.span_id, "016x"),
                    "parent": format(s.parent.span_id, "016x") if s.parent else None,
                    "attributes": dict(s.attributes)}) + "\\n")
        return SpanExportResult.SUCCESS

provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(ToFile()))
trace.set_tracer_provider(provider)

@tool
def echo(text: str) -> str:
    """Say it back."""
    return text
'''


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    spans = tmp_path / "spans.jsonl"
    tools = tmp_path / "traced_tools.py"
    tools.write_text(f"SPANS = {str(spans)!r}\n" + textwrap.dedent(TOOLS))
    proc, url = _start(tmp_path, tools=str(tools))
    yield url, spans
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=20) in (0, 130)
    no_traceback(proc)


def _client(url: str, headers: dict[str, str]) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {CLIENT_TOKENS[url]}",
                                       **headers}, timeout=60)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http))


def _spans(path: Path) -> dict[str, list[dict[str, object]]]:
    found: dict[str, list[dict[str, object]]] = {}
    for line in path.read_text().splitlines():
        span = json.loads(line)
        found.setdefault(span["name"], []).append(span)
    return found


async def test_the_calls_span_continues_the_trace_of_the_http_request(
        served: tuple[str, Path]) -> None:
    url, spans = served
    async with _client(url, {"traceparent": f"00-{HEADER_TRACE}-{HEADER_PARENT}-01"}) as client:
        assert text_of((await client.call_tool("echo", {"text": "hi"})).content[0]) == "hi"
    found = _spans(spans)
    (span,), (mcp_call,) = found["execute_tool echo"], found["tools/call echo"]
    assert (mcp_call["trace_id"], mcp_call["parent"]) == (HEADER_TRACE, HEADER_PARENT)
    assert (span["trace_id"], span["parent"]) == (HEADER_TRACE, mcp_call["span_id"])
    attributes = span["attributes"]
    assert isinstance(attributes, dict)
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["gen_ai.tool.type"] == "function"
    assert str(attributes["gen_ai.tool.call.id"]).startswith("mcp_")
    assert attributes["toolkeeper.client"] == "default"
    assert "hi" not in json.dumps(attributes)  # arguments and results stay off spans


async def test_meta_traceparent_wins_over_the_header_and_none_starts_a_new_trace(
        served: tuple[str, Path]) -> None:
    url, spans = served
    async with _client(url, {"traceparent": f"00-{HEADER_TRACE}-{HEADER_PARENT}-01"}) as client:
        await client.call_tool("echo", {"text": "a"}, meta={  # type: ignore[arg-type]  # a key the SDK does not declare
            "traceparent": f"00-{META_TRACE}-{META_PARENT}-01"})
    async with _client(url, {}) as client:
        await client.call_tool("echo", {"text": "b"})
    found = _spans(spans)
    (with_meta, without), mcp_calls = found["execute_tool echo"], found["tools/call echo"]
    assert (mcp_calls[0]["trace_id"], mcp_calls[0]["parent"]) == (META_TRACE, META_PARENT)
    assert (with_meta["trace_id"], with_meta["parent"]) == (META_TRACE, mcp_calls[0]["span_id"])
    assert mcp_calls[1]["parent"] is None and without["parent"] == mcp_calls[1]["span_id"]
    assert without["trace_id"] not in (META_TRACE, HEADER_TRACE)


UNTRACED = '''
import mcp.shared._otel as sdk_otel
from toolkeeper import tool


class Watched:
    """The MCP SDK's tracer, each span it is asked for written down."""

    def __init__(self, tracer):
        self.tracer = tracer

    def start_as_current_span(self, name, *args, **kwargs):
        with open(STARTED, "a") as out:
            out.write(name + "\\n")
        return self.tracer.start_as_current_span(name, *args, **kwargs)


sdk_otel._tracer = Watched(sdk_otel._tracer)


@tool
def echo(text: str) -> str:
    """Say it back."""
    return text
'''


async def test_without_a_tracer_the_sdk_makes_no_span_per_request(tmp_path: Path) -> None:
    started = tmp_path / "started.txt"
    tools = tmp_path / "untraced_tools.py"
    tools.write_text(f"STARTED = {str(started)!r}\n" + textwrap.dedent(UNTRACED))
    proc, url = _start(tmp_path, tools=str(tools))
    try:
        async with _client(url, {"traceparent": f"00-{HEADER_TRACE}-{HEADER_PARENT}-01"}) \
                as client:
            answers = [await client.call_tool("echo", {"text": str(n)}) for n in range(3)]
            listed = await client.list_tools()
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) in (0, 130)
    assert [text_of(a.content[0]) for a in answers] == ["0", "1", "2"]
    assert [t.name for t in listed.tools] == ["echo"]
    spans = started.read_text().splitlines() if started.exists() else []
    assert spans == [], f"span work with no tracer set up: {spans}"
