"""Parsers never raise anything but a toolkeeper error, whatever payload they are handed."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolkeeper import API_FORMATS, ToolCall, WireFormatError, parse_tool_calls

KEYS = st.sampled_from(["choices", "message", "tool_calls", "function", "name", "arguments", "id",
                        "output", "type", "function_call", "call_id", "content", "tool_use",
                        "input", "candidates", "parts", "functionCall", "args", "params",
                        "method", "role", "assistant"])
LEAVES = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10),
                   st.sampled_from(["function_call", "tool_use", "tools/call", "assistant",
                                    '{"a": 1}', "{bad json"]))
PAYLOADS = st.recursive(
    LEAVES,
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(KEYS, children, max_size=5)),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None)
@given(PAYLOADS, st.sampled_from(API_FORMATS))
def test_any_payload_parses_or_raises_a_wire_format_error(payload: Any, api_format: str) -> None:
    try:
        calls = parse_tool_calls(payload, api_format)
    except WireFormatError:
        return
    for call in calls:
        assert isinstance(call, ToolCall)
        assert isinstance(call.arguments, dict)
        assert isinstance(call.name, str)
