"""A code-mode run is a span, the parent of every call its script makes (the real sandbox)."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from toolkeeper import Toolbox, ToolInvoker, tool
from toolkeeper.codemode import ToolChainTool
from toolkeeper.core.call import ToolCall

pytestmark = pytest.mark.anyio


@tool
def get_weather(city: str) -> dict:  # type: ignore[type-arg]
    """Weather for a city."""
    return {"city": city, "temp": 21}


@tool
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


def traced() -> tuple[ToolInvoker, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    box = Toolbox([get_weather, shout])
    invoker = ToolInvoker(box, tracer_provider=provider)
    box.add(ToolChainTool(invoker))
    return invoker, exporter


async def test_the_run_is_the_parent_of_its_calls_under_the_chain_tools_own_span() -> None:
    invoker, exporter = traced()
    async with invoker.open_session() as session:
        result = await invoker.invoke(ToolCall(id="c1", name="tool_chain", arguments={
            "code": "w = get_weather(city='Oslo')\nresult = shout(text=w.structured['city']).text"
        }), session=session)
    assert result.ok, result.text
    spans = exporter.get_finished_spans()
    by_name = {s.name: s for s in spans}
    assert sorted(by_name) == ["code_mode run", "execute_tool get_weather", "execute_tool shout",
                               "execute_tool tool_chain"]
    outer, run = by_name["execute_tool tool_chain"], by_name["code_mode run"]
    assert outer.parent is None
    assert run.parent is not None and run.parent.span_id == outer.context.span_id
    for name in ("execute_tool get_weather", "execute_tool shout"):
        assert getattr(by_name[name].parent, "span_id", None) == run.context.span_id
        assert by_name[name].context.trace_id == outer.context.trace_id
    attributes = dict(run.attributes or {})
    assert (attributes["toolkeeper.code_mode.status"], attributes["toolkeeper.code_mode.calls"]
            ) == ("ok", 2)


async def test_a_failed_run_is_an_error_span() -> None:
    invoker, exporter = traced()
    chain = invoker.registry.get("tool_chain")
    assert isinstance(chain, ToolChainTool)
    run = await chain.run_chain("get_weather(city='Oslo')\nraise SystemExit(3)")
    assert run.status == "error"
    by_name = {s.name: s for s in exporter.get_finished_spans()}
    span = by_name["code_mode run"]
    assert span.parent is None
    assert span.status.status_code is StatusCode.ERROR
    assert dict(span.attributes or {})["error.type"] == "error"
    assert getattr(by_name["execute_tool get_weather"].parent, "span_id", None) == span.context.span_id
