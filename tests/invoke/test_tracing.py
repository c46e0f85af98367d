"""Each call is an OpenTelemetry span named and shaped by OpenTelemetry's GenAI conventions for a
tool's execution, read back from the SDK's in-memory exporter."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv.attributes import error_attributes
from opentelemetry.trace import SpanKind, StatusCode

from toolkeeper import MemoryBlobStore, Toolbox, ToolInvoker, tool
from toolkeeper.approval.handlers import CallbackApprovalHandler
from toolkeeper.core.results import ToolResult
from toolkeeper.core.spec import ToolLike
from toolkeeper.guardrails import ArgumentDenyPatterns
from toolkeeper.guardrails.base import GuardrailOutcome, passed, trip
from toolkeeper.invoke import ChainPolicy
from toolkeeper.invoke.tracing import (
    ERROR_TYPE,
    EXECUTE_TOOL,
    OPERATION_NAME,
    TOOL_CALL_ID,
    TOOL_NAME,
    TOOL_TYPE,
    TracerSource,
    continued,
)

from .helpers import call, toolbox

pytestmark = pytest.mark.anyio


def traced(**kwargs: object) -> tuple[ToolInvoker, InMemorySpanExporter, TracerProvider]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return ToolInvoker(toolbox(), tracer_provider=provider, **kwargs), exporter, provider  # type: ignore[arg-type]


async def one_span(invoker: ToolInvoker, exporter: InMemorySpanExporter, name: str,
                   **arguments: object) -> ReadableSpan:
    async with invoker.open_session() as session:
        await invoker.invoke(call(name, **arguments), session=session)
    (span,) = exporter.get_finished_spans()
    return span


def test_the_attribute_names_are_the_conventions_own() -> None:
    assert OPERATION_NAME == gen_ai.GEN_AI_OPERATION_NAME
    assert gen_ai.GenAiOperationNameValues.EXECUTE_TOOL.value == EXECUTE_TOOL
    assert (TOOL_NAME, TOOL_CALL_ID, TOOL_TYPE) == (
        gen_ai.GEN_AI_TOOL_NAME, gen_ai.GEN_AI_TOOL_CALL_ID, gen_ai.GEN_AI_TOOL_TYPE)
    assert ERROR_TYPE == error_attributes.ERROR_TYPE


async def test_a_call_is_one_execute_tool_span_with_the_conventions_attributes() -> None:
    invoker, exporter, _ = traced()
    async with invoker.open_session() as session:
        result = await invoker.invoke(call("add", a=2, b=3), session=session)
    (span,) = exporter.get_finished_spans()
    assert span.name == "execute_tool add"
    assert span.kind is SpanKind.INTERNAL
    attributes = dict(span.attributes or {})
    assert attributes[OPERATION_NAME] == "execute_tool"
    assert attributes[TOOL_NAME] == "add"
    assert attributes[TOOL_CALL_ID] == result.call_id
    assert attributes[TOOL_TYPE] == "function"
    assert attributes["toolkeeper.status"] == "ok"
    assert attributes["toolkeeper.ran"] is True
    assert ERROR_TYPE not in attributes
    assert span.status.status_code is StatusCode.UNSET
    assert "2" not in {str(v) for v in attributes.values()}  # arguments never on a span


@pytest.mark.parametrize(("name", "arguments", "error_type", "gate"), [
    ("boom", {"message": "disk full"}, "tool_raised", None),
    ("add", {"a": 1}, "invalid_arguments", "validate"),
    ("ad", {}, "unknown_tool", "lookup"),
    ("slow", {"seconds": 2}, "timeout", "timeout"),
    ("delete_file", {"path": "/x"}, "denied", "approval"),
])
async def test_a_failed_or_refused_call_is_an_error_span_naming_the_gate(
        name: str, arguments: dict[str, object], error_type: str, gate: str | None) -> None:
    invoker, exporter, _ = traced()
    span = await one_span(invoker, exporter, name, **arguments)
    attributes = dict(span.attributes or {})
    assert span.status.status_code is StatusCode.ERROR
    assert attributes[ERROR_TYPE] == error_type
    assert attributes.get("toolkeeper.gate") == gate
    refused = [e for e in span.events if e.name == "toolkeeper.refused"]
    assert [dict(e.attributes or {}).get("toolkeeper.gate") for e in refused] == (
        [gate] if gate else [])


async def test_a_guardrail_refusal_names_the_guardrail_gate() -> None:
    invoker, exporter, _ = traced(guardrails=[ArgumentDenyPatterns({"boom": [r"rm -rf"]})])
    span = await one_span(invoker, exporter, "boom", message="rm -rf /")
    assert dict(span.attributes or {})["toolkeeper.gate"] == "guardrails"
    assert dict(span.attributes or {})[ERROR_TYPE] == "guardrail_tripped"


async def test_an_approved_call_says_who_decided_and_how_long_it_waited() -> None:
    async def slow_yes(request: object) -> bool:
        await anyio.sleep(0.05)
        return True

    invoker, exporter, _ = traced(approval_handler=CallbackApprovalHandler(slow_yes))
    span = await one_span(invoker, exporter, "delete_file", path="/x")
    attributes = dict(span.attributes or {})
    assert attributes["toolkeeper.approval.outcome"] == "approved"
    assert attributes["toolkeeper.approval.decided_by"] == "callback"
    assert float(attributes["toolkeeper.approval.wait_s"]) >= 0.05  # type: ignore[arg-type]
    assert str(attributes["toolkeeper.approval.id"])
    (event,) = [e for e in span.events if e.name == "toolkeeper.approval"]
    assert dict(event.attributes or {})["toolkeeper.approval.decided_by"] == "callback"
    assert span.status.status_code is StatusCode.UNSET


async def test_an_offloaded_result_is_an_event_with_its_artifact() -> None:
    invoker, exporter, _ = traced(artifact_store=MemoryBlobStore(),
                                  policy=ChainPolicy(max_inline_result_bytes=64))
    async with invoker.open_session() as session:
        result = await invoker.invoke(call("big", size=5000), session=session)
    assert result.artifact_ref is not None
    (span,) = exporter.get_finished_spans()
    assert dict(span.attributes or {})["toolkeeper.artifact.ref"] == result.artifact_ref
    assert [e.name for e in span.events] == ["toolkeeper.artifact.offloaded"]


async def test_the_span_is_a_child_of_the_callers_and_the_tools_own_spans_are_its() -> None:
    invoker, exporter, provider = traced()
    inner = provider.get_tracer("test")

    @tool
    async def fetch(url: str) -> str:
        """Fetch a page."""
        with inner.start_as_current_span("http get"):
            return url

    assert isinstance(invoker.registry, Toolbox)
    invoker.registry.add(fetch)
    with inner.start_as_current_span("agent turn") as turn:
        async with invoker.open_session() as session:
            await invoker.invoke(call("fetch", url="u"), session=session)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert getattr(spans["execute_tool fetch"].parent, "span_id", None) == turn.get_span_context().span_id
    assert getattr(spans["http get"].parent, "span_id", None) == spans["execute_tool fetch"].context.span_id


async def test_a_trace_context_from_outside_is_continued() -> None:
    invoker, exporter, _ = traced()
    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    with continued({"traceparent": f"00-{trace_id}-{parent_id}-01"}):
        await one_span(invoker, exporter, "add", a=1, b=2)
    (span,) = exporter.get_finished_spans()
    assert format(span.context.trace_id, "032x") == trace_id
    assert span.parent is not None and format(span.parent.span_id, "016x") == parent_id
    assert span.parent.is_remote


@pytest.mark.parametrize("carrier", [None, {}, {"traceparent": "garbage"},
                                     {"traceparent": 7}, {"tracestate": "a=b"}])
async def test_a_missing_or_broken_trace_context_starts_a_trace_of_its_own(
        carrier: dict[str, object] | None) -> None:
    invoker, exporter, _ = traced()
    with continued(carrier):
        span = await one_span(invoker, exporter, "add", a=1, b=2)
    assert span.parent is None


async def test_a_cancelled_call_ends_its_span_as_cancelled() -> None:
    invoker, exporter, _ = traced()
    async with invoker.open_session() as session:
        with anyio.move_on_after(0.05):
            await invoker.invoke(call("slow", seconds=0.15), session=session)
    (span,) = exporter.get_finished_spans()
    assert dict(span.attributes or {})[ERROR_TYPE] == "cancelled"
    assert span.status.status_code is StatusCode.ERROR


def test_without_an_sdk_there_is_no_tracer_and_one_set_later_is_used() -> None:
    # The global provider can be set once per process: this runs in a fresh one.
    script = textwrap.dedent("""
        import asyncio
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from toolkeeper import ToolInvoker, tool
        from toolkeeper.core.call import ToolCall
        from toolkeeper.invoke.tracing import TracerSource

        @tool
        def add(a: int, b: int) -> int:
            "Add."
            return a + b

        async def once(invoker):
            async with invoker.open_session() as session:
                await invoker.invoke(ToolCall(id="c1", name="add", arguments={"a": 1, "b": 2}),
                                     session=session)

        invoker = ToolInvoker([add])
        assert TracerSource().tracer() is None
        asyncio.run(once(invoker))
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        asyncio.run(once(invoker))
        print([s.name for s in exporter.get_finished_spans()])
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "['execute_tool add']"


def test_an_untraced_process_has_no_tracer() -> None:
    assert not isinstance(trace.get_tracer_provider(), TracerProvider)
    assert TracerSource().tracer() is None


def test_a_process_that_does_not_use_opentelemetry_never_imports_it() -> None:
    script = textwrap.dedent("""
        import asyncio, sys
        from toolkeeper import ToolCall, ToolInvoker, tool

        @tool
        def add(a: int, b: int) -> int:
            "Add."
            return a + b

        async def once():
            invoker = ToolInvoker([add])
            async with invoker.open_session() as session:
                return await invoker.invoke(ToolCall(id="c", name="add",
                                                     arguments={"a": 1, "b": 2}), session=session)

        assert asyncio.run(once()).text == "3"
        print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "[]"


CARD = "4111-1111-1111-1111"
SECRET_PATH = "/home/alice/.ssh/id_ed25519"


class _Echoing:
    """A guardrail whose reason repeats the value it refused (as a careless one would)."""

    name = "no_cards"

    async def check_input(self, tool: ToolLike, arguments: dict[str, object]
                          ) -> GuardrailOutcome:
        text = str(arguments)
        return trip(f"a card number in {text}") if CARD in text else passed()

    async def check_output(self, tool: ToolLike, result: ToolResult) -> GuardrailOutcome:
        return passed()


@tool
def read_key(path: str) -> str:
    """Read a key file."""
    raise FileNotFoundError(f"[Errno 2] No such file or directory: '{path}'")


@tool
def lookup_card(number: str) -> str:
    """Look a card up."""
    return number


def _everything_on(span: ReadableSpan) -> str:
    """Every text a span carries out of the process: its name, attributes, status
    description, events and their attributes, links."""
    parts = [span.name, span.status.description or ""]
    parts += [f"{k}={v!s}" for k, v in (span.attributes or {}).items()]
    for event in span.events:
        parts.append(event.name)
        parts += [f"{k}={v!s}" for k, v in (event.attributes or {}).items()]
    for link in span.links:
        parts += [f"{k}={v!s}" for k, v in (link.attributes or {}).items()]
    return "\n".join(parts)


@pytest.mark.parametrize(("name", "arguments", "code", "gate", "ran"), [
    ("add", {"a": CARD, "b": 1}, "invalid_arguments", "validate", False),
    ("read_key", {"path": SECRET_PATH}, "tool_raised", None, True),
    ("lookup_card", {"number": CARD}, "guardrail_tripped", "guardrails", False),
])
async def test_nothing_a_call_carries_reaches_its_span(
        name: str, arguments: dict[str, object], code: str, gate: str | None,
        ran: bool) -> None:
    invoker, exporter, _ = traced(guardrails=[_Echoing()])
    assert isinstance(invoker.registry, Toolbox)
    invoker.registry.add(read_key)
    invoker.registry.add(lookup_card)
    async with invoker.open_session() as session:
        result = await invoker.invoke(call(name, **arguments), session=session)
    secret = str(next(iter(arguments.values())))
    assert secret in result.text  # the model is told; telemetry is not
    (span,) = exporter.get_finished_spans()
    carried = _everything_on(span)
    assert secret not in carried and "1111" not in carried and "alice" not in carried
    attributes = dict(span.attributes or {})
    assert (attributes[ERROR_TYPE], attributes.get("toolkeeper.gate")) == (code, gate)
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == code  # the code, never the message
    assert attributes["toolkeeper.ran"] is ran
    assert [e.name for e in span.events if e.name == "exception"] == []


async def test_inside_another_calls_execute_tool_span_a_call_keeps_its_own_execute_tool_span(
) -> None:
    invoker, exporter, provider = traced()
    tracer = provider.get_tracer("framework")
    async with invoker.open_session() as session:
        with tracer.start_as_current_span("execute_tool run_script", attributes={
                OPERATION_NAME: EXECUTE_TOOL, TOOL_NAME: "run_script",
                TOOL_CALL_ID: "outer"}):
            await invoker.invoke(call("add", a=1, b=2), session=session)
        with tracer.start_as_current_span("tools/call add", attributes={
                OPERATION_NAME: EXECUTE_TOOL, TOOL_NAME: "add"}):  # the request: no call id
            await invoker.invoke(call("add", a=1, b=2), session=session)
    names = [s.name for s in exporter.get_finished_spans()]
    assert names == ["execute_tool add", "execute_tool run_script", "execute_tool add",
                     "tools/call add"]
