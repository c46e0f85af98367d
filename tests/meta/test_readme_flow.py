"""The README's code example runs as written, against a fake Anthropic client that answers with
the SDK's own response objects (a tool call, then a final answer)."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path
from typing import Any, ClassVar

import pytest
from anthropic.types import Message

README = Path(__file__).resolve().parents[2] / "README.md"


def _message(content: list[dict[str, Any]], stop: str) -> Message:
    return Message.model_validate({
        "id": "msg", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": content, "stop_reason": stop, "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1}})


class FakeAnthropic:
    """``anthropic.AsyncAnthropic`` for one conversation: it asks for two forecasts (one call
    malformed), then answers; every request is kept."""

    requests: ClassVar[list[dict[str, Any]]] = []

    def __init__(self) -> None:
        self.messages = types.SimpleNamespace(create=self._create)

    async def _create(self, **request: Any) -> Message:
        FakeAnthropic.requests.append({**request, "messages": list(request["messages"])})
        if len(FakeAnthropic.requests) == 1:
            return _message([{"type": "text", "text": "Checking."},
                             {"type": "tool_use", "id": "t1", "name": "get_forecast",
                              "input": {"city": "Lisbon", "days": 1}},
                             {"type": "tool_use", "id": "t2", "name": "get_forecast",
                              "input": {}}], "tool_use")
        return _message([{"type": "text", "text": "Sunny in Lisbon tomorrow."}], "end_turn")


def test_the_readme_example_runs_as_written(monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    (code,) = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)[:1]
    fake = types.ModuleType("anthropic")
    fake.AsyncAnthropic = FakeAnthropic  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "anthropic", fake)
    FakeAnthropic.requests = []
    exec(compile(code, str(README), "exec"), {"__name__": "readme"})
    assert capsys.readouterr().out == "Sunny in Lisbon tomorrow.\n"
    first, second = FakeAnthropic.requests
    assert [t["name"] for t in first["tools"]] == ["get_forecast"]
    user, assistant, results = second["messages"]
    assert user["role"] == "user"
    assert assistant["role"] == "assistant" and assistant["content"][1]["id"] == "t1"
    ok, bad = results["content"]
    assert ok["tool_use_id"] == "t1" and '"summary":"sunny"' in ok["content"][0]["text"]
    assert bad["is_error"] is True and "missing required argument 'city'" in bad["content"][0]["text"]
