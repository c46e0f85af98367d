"""The OpenAI Responses items of provider-defined tools (their ``call_types``).

A response item whose type a ``ProviderDefinedTool`` declared in ``call_types`` — a
``computer_call``, an ``apply_patch_call``, a ``shell_call``… — is a call of that tool: its
``ToolCall`` carries the item as it came (``arguments``) and its type (``call_type``), and the
tool's ``handle_call`` reads it. The result goes back as the matching output item
(``computer_call_output``, ``apply_patch_call_output``…), shaped as the Responses API wants it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..core.call import CallProblem, ToolCall
from ..core.json import JsonObject, JsonValue
from ..core.results import FileBlock, ImageBlock, ToolResult
from .names import WireNames

__all__ = ["provider_call", "provider_output"]


def provider_call(item: Mapping[str, object], names: WireNames | None, api_format: str
                  ) -> ToolCall | None:
    """The call an output item stands for, when a provider-defined tool declared its type."""
    kind = item.get("type")
    tools = names.call_types.get(kind) if names is not None and isinstance(kind, str) else None
    if not tools or not isinstance(kind, str):
        return None
    problem = None
    named = item.get("name")
    if len(tools) == 1:
        name = tools[0]
    elif isinstance(named, str) and named in tools:
        name = named  # a custom_tool_call names its tool
    else:
        name = tools[0]
        problem = CallProblem(code="malformed_call", message=(
            f"a '{kind}' item could be a call of any of {', '.join(tools)}; give only one "
            f"provider-defined tool the call type '{kind}'"))
    call_id = item.get("call_id") or item.get("id")
    if not isinstance(call_id, str) or not call_id:
        problem = problem or CallProblem(code="malformed_call",
                                         message=f"the '{kind}' item has no call_id")
    return ToolCall(id=str(call_id or ""), name=name, arguments=dict(item),
                    wire_name=named if isinstance(named, str) else kind, problem=problem,
                    api_format=api_format, call_type=kind)


def provider_output(call: ToolCall, result: ToolResult) -> JsonObject:
    """The ``<call_type>_output`` item carrying ``result`` back for ``call``."""
    kind = call.call_type or "function_call"
    shape = _SHAPES.get(kind, _text)
    item: JsonObject = {"type": f"{kind}_output", **shape(call, result)}
    caller = call.arguments.get("caller")
    if kind in _WITH_CALLER and isinstance(caller, dict):
        item["caller"] = {str(k): _json(v) for k, v in caller.items()}
    return item


def _json(value: object) -> JsonValue:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Mapping):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    return str(value)


def _structured(result: ToolResult, key: str) -> JsonValue:
    found = result.structured_content
    return _json(found.get(key)) if isinstance(found, Mapping) else None


def _computer(call: ToolCall, result: ToolResult) -> JsonObject:
    """A screenshot: the first image of the result (or a ``file_id`` in its structured
    content); the safety checks the application acknowledged, when its result names them."""
    screenshot: JsonObject = {"type": "computer_screenshot"}
    image = next((b for b in result.content if isinstance(b, ImageBlock | FileBlock) and b.data
                  and b.media_type.startswith("image/")), None)
    file_id = _structured(result, "file_id")
    if image is not None:
        screenshot["image_url"] = f"data:{image.media_type};base64,{image.data}"
    elif isinstance(file_id, str):
        screenshot["file_id"] = file_id
    else:  # nothing to show (a refused or failed action): an empty screenshot, as the SDK's
        screenshot["image_url"] = ""
    out: JsonObject = {"call_id": call.id, "output": screenshot}
    acknowledged = _structured(result, "acknowledged_safety_checks")
    if isinstance(acknowledged, list):
        out["acknowledged_safety_checks"] = acknowledged
    return out


def _apply_patch(call: ToolCall, result: ToolResult) -> JsonObject:
    out: JsonObject = {"call_id": call.id, "status": "failed" if result.is_error else "completed"}
    if result.text:
        out["output"] = result.text
    return out


def _shell(call: ToolCall, result: ToolResult) -> JsonObject:
    """The result's structured ``output`` (stdout, stderr and outcome per command) when it has
    one, else its text as one command's stdout (stderr for an error)."""
    given = _structured(result, "output")
    if isinstance(given, list):
        return {"call_id": call.id, "output": given}
    code = 1 if result.is_error else 0
    stdout, stderr = ("", result.text) if result.is_error else (result.text, "")
    return {"call_id": call.id, "output": [
        {"stdout": stdout, "stderr": stderr, "outcome": {"type": "exit", "exit_code": code}}]}


def _local_shell(call: ToolCall, result: ToolResult) -> JsonObject:
    return {"id": call.id, "output": result.text}


def _text(call: ToolCall, result: ToolResult) -> JsonObject:
    return {"call_id": call.id, "output": result.text}


_SHAPES: dict[str, Callable[[ToolCall, ToolResult], JsonObject]] = {
    "computer_call": _computer,
    "apply_patch_call": _apply_patch,
    "shell_call": _shell,
    "local_shell_call": _local_shell,
}
_WITH_CALLER = frozenset({"apply_patch_call", "shell_call", "custom_tool_call"})
