"""A catalog runs calls through the door without importing it: given a door it uses that one,
given none it builds the one the package declares (an entry point), and the door runs a batch
itself — so the catalog and the door form no import cycle."""

from __future__ import annotations

from toolkeeper import Toolbox, ToolCall, ToolInvoker, tool
from toolkeeper.toolbox.door import door_for


@tool
def double(n: int) -> int:
    """Double a number."""
    return n * 2


@tool(risk="critical")
def wipe(path: str) -> str:
    """Delete everything under a path."""
    return f"wiped {path}"


def _response(name: str) -> dict[str, object]:
    return {"choices": [{"message": {"role": "assistant", "tool_calls": [{
        "id": "c1", "type": "function", "function": {"name": name, "arguments": '{"n": 4}'}}]}}]}


def test_the_door_runs_a_batch_itself_and_renders_the_providers_messages() -> None:
    door = ToolInvoker([double, wipe])
    ran, denied = door.execute_tool_calls([ToolCall(id="1", name="double", arguments={"n": 2}),
                                           ToolCall(id="2", name="wipe", arguments={"path": "/"})])
    assert (ran.text, denied.error_code) == ("4", "denied")  # type: ignore[union-attr]
    (message,) = door.execute_tool_calls(_response("double"), "openai-chat")
    assert message == {"role": "tool", "tool_call_id": "c1", "content": "8"}


def test_a_catalog_without_a_door_builds_the_one_the_package_declares() -> None:
    box = Toolbox([double, wipe])
    door = door_for(box)
    assert isinstance(door, ToolInvoker) and door.registry is box
    ran, denied = box.execute_tool_calls([ToolCall(id="1", name="double", arguments={"n": 5}),
                                          ToolCall(id="2", name="wipe", arguments={"path": "/"})])
    assert (ran.text, denied.error_code) == ("10", "denied")  # type: ignore[union-attr]


def test_a_view_given_a_door_reads_the_calls_with_its_own_names() -> None:
    box = Toolbox([double])
    view = box.prefixed("math")
    (message,) = view.execute_tool_calls(_response("math_double"), "openai-chat",
                                         invoker=ToolInvoker(view))
    assert message["content"] == "8"  # type: ignore[index]
