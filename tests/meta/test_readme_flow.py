"""The README's 'In code' flow works as written (with a recorded Anthropic response)."""

from __future__ import annotations

import pytest
from anthropic.types import Message

from toolkeeper import ToolInvoker, export, tool

pytestmark = pytest.mark.anyio


@tool
def get_forecast(city: str, days: int = 1) -> dict:  # type: ignore[type-arg]
    """Get the weather forecast for a city.

    Args:
        city: City name, e.g. "Lisbon".
        days: How many days ahead.
    """
    return {"city": city, "days": days, "summary": "sunny"}


async def test_readme_flow() -> None:
    exported = export([get_forecast], "anthropic")
    response = Message.model_validate({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [{"type": "tool_use", "id": "t1", "name": "get_forecast",
                     "input": {"city": "Lisbon"}},
                    {"type": "tool_use", "id": "t2", "name": "get_forecast", "input": {}}],
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1}})
    messages: list[dict[str, object]] = []
    invoker = ToolInvoker([get_forecast])
    async with invoker.open_session() as session:
        calls = exported.parse(response)
        results = await invoker.invoke_many(calls, session=session)
    messages.extend(exported.render([(c, r.to_tool_result()) for c, r in zip(calls, results,
                                                                            strict=True)]))
    (message,) = messages
    first, second = message["content"]  # type: ignore[misc]
    assert first["content"][0]["text"] == '{"city":"Lisbon","days":1,"summary":"sunny"}'
    assert second["is_error"] is True
    assert "missing required argument 'city'" in second["content"][0]["text"]
